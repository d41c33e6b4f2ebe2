import ArgumentParser
import Foundation
import SignInWithApple
import WebAuthnCore
import _WebAuthnEncoding

/// `webauthn apple ...`: Sign in with Apple tools.
struct AppleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apple",
        abstract: "Sign in with Apple: verify identity tokens.",
        subcommands: [AppleVerifyToken.self]
    )
}

/// `webauthn apple verify-token --token FILE|- --client-id ID [...] --jwks FILE [--nonce VALUE] [--at ISO8601]`
struct AppleVerifyToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-token",
        abstract: "Verify an Apple identity token against a saved key set (https://appleid.apple.com/auth/keys).")

    @Option(parsing: .unconditional, help: "The identity token file (compact JWS); - for stdin.")
    var token: String

    @Option(name: .customLong("client-id"), parsing: .unconditionalSingleValue, help: "An accepted audience: a bundle ID or Services ID (repeatable).")
    var clientIDs: [String] = []

    @Option(parsing: .unconditional, help: "The JWKS file with Apple's keys.")
    var jwks: String

    @Option(parsing: .unconditional, help: "The nonce the server issued; the token's nonce must be it or its SHA-256 in lowercase hex.")
    var nonce: String?

    @Option(parsing: .unconditional, help: "Verify as of this time instead of now: a full RFC 3339 time, such as 2024-08-31T12:00:00Z.")
    var at: String?

    func validate() throws {
        guard !clientIDs.isEmpty else { throw ValidationError("at least one --client-id is required") }
        guard clientIDs.allSatisfy({ !$0.isEmpty }) else { throw ValidationError("--client-id must not be empty") }
        if let at, CommonVerifyOptions.parseDate(at) == nil { throw ValidationError("--at is not a full RFC 3339 time (such as 2024-08-31T12:00:00Z): \(at)") }
    }

    func run() async throws {
        let tokenBytes = try readInput(token)
        let jwksBytes = try readInput(jwks)
        // Sized as read, before any decoding (a trailing newline or two is allowed).
        guard tokenBytes.count <= AppleTokenVerifier.maxTokenSize + 1024 else {
            throw VerificationFailure(
                error: WebAuthnError(.appleTokenMalformed, "the token file is \(tokenBytes.count) bytes; a token is at most \(AppleTokenVerifier.maxTokenSize)")
            )
        }
        let now = at.flatMap(CommonVerifyOptions.parseDate) ?? Date()
        // Surrounding whitespace (a trailing newline in the file) is not part of the token.
        let text = String(decoding: tokenBytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        do {
            let keys = try AppleKeySet(json: jwksBytes)
            let t = try AppleTokenVerifier.verifyIdentityToken(text, keys: keys, clientIDs: clientIDs, nonce: nonce, now: now)
            Output.print(Self.json(t))
        } catch {
            throw VerificationFailure(error: error)
        }
    }

    static func json(_ t: AppleIdentityToken) -> JSONValue {
        func optional(_ b: Bool?) -> JSONValue { b.map(JSONValue.bool) ?? .null }
        let iso = ISO8601DateFormatter()
        return .object([
            "status": "ok",
            "sub": .string(t.sub),
            "audience": .string(t.audience),
            "email": t.email.map(JSONValue.string) ?? .null,
            "emailVerified": optional(t.emailVerified),
            "isPrivateEmail": optional(t.isPrivateEmail),
            "realUserStatus": t.realUserStatus.map { .number(Double($0.rawValue)) } ?? .null,
            "transferSub": t.transferSub.map(JSONValue.string) ?? .null,
            "nonceSupported": optional(t.nonceSupported),
            "issuedAt": .string(iso.string(from: t.issuedAt)),
            "expiresAt": .string(iso.string(from: t.expiresAt)),
        ])
    }
}
