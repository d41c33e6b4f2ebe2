import Foundation
import Testing
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding

/// `webauthn apple verify-token --token FILE|- --client-id ID [...] --jwks FILE [--nonce VALUE] [--at ISO8601]`
@Suite("webauthn apple verify-token")
struct AppleCLITests {
    static let clientID = "com.example.app"
    let standIn: AppleStandIn
    let user = AppleStandIn.User(sub: "001234.cli.0042", email: "cli@example.com")
    let jwks: String

    init() throws {
        standIn = try AppleStandIn(credentials: try AppleStandIn.makeCredentials(), clientIDs: [Self.clientID])
        jwks = try Self.file(standIn.keySetJSON)
    }

    static func file(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("webauthn-apple-\(UUID().uuidString)").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("a token minted by the stand-in verifies: status ok and the claims, exit 0; from a file or stdin")
    func ok() async throws {
        let token = standIn.identityToken(for: user, audience: Self.clientID, nonce: "nonce-1")
        let run = try await CLITests.run([
            "apple", "verify-token", "--token", try Self.file(token + "\n"), "--client-id", "com.example.other",
            "--client-id", Self.clientID, "--jwks", jwks, "--nonce", "nonce-1",
        ])
        #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
        let json = try #require(run.json)
        #expect(json["status"] == "ok")
        #expect(json["sub"] == "001234.cli.0042")
        #expect(json["audience"] == .string(Self.clientID))
        #expect(json["email"] == "cli@example.com")
        #expect(json["emailVerified"] == true)
        #expect(json["isPrivateEmail"] == false)
        #expect(json["realUserStatus"] == 2)
        let stdin = try await CLITests.run(["apple", "verify-token", "--token", "-", "--client-id", Self.clientID, "--jwks", jwks], stdin: token)
        #expect(stdin.status == 0)
        #expect(stdin.json?["sub"] == "001234.cli.0042")
    }

    @Test("refusals print status failed with the code, exit 1")
    func refusals() async throws {
        let token = standIn.identityToken(for: user, audience: Self.clientID, nonce: "nonce-1", issuedAt: Date(timeIntervalSince1970: 1_800_000_000))
        let cases: [([String], String)] = [
            (["--nonce", "other", "--at", "2027-01-15T09:00:00Z"], "apple_nonce_mismatch"),
            (["--at", "2027-01-01T00:00:00Z"], "apple_token_claim_invalid"),  // issued in the future
            (["--at", "2027-01-16T08:01:01Z"], "apple_token_expired"),
        ]
        for (extra, code) in cases {
            let run = try await CLITests.run(["apple", "verify-token", "--token", try Self.file(token), "--client-id", Self.clientID, "--jwks", jwks] + extra)
            #expect(run.status == 1, "\(extra) \(run.stdout) \(run.stderr)")
            #expect(run.json?["status"] == "failed")
            #expect(run.json?["error"] == .string(code), "\(extra)")
            #expect((run.json?["message"]?.stringValue ?? "").count > 5)
        }
        let atIssue = ["--at", "2027-01-15T08:00:00Z"]
        let wrongAud = try await CLITests.run(
            ["apple", "verify-token", "--token", try Self.file(token), "--client-id", "com.example.other", "--jwks", jwks] + atIssue)
        #expect(wrongAud.status == 1 && wrongAud.json?["error"] == "apple_token_claim_invalid")
        let forged = standIn.sign(payload: Array(#"{"iss":"https://appleid.apple.com"}"#.utf8), defect: .algorithmNone)
        let none = try await CLITests.run(["apple", "verify-token", "--token", try Self.file(forged), "--client-id", Self.clientID, "--jwks", jwks] + atIssue)
        #expect(none.status == 1 && none.json?["error"] == "apple_token_malformed")
        let badSet = try await CLITests.run([
            "apple", "verify-token", "--token", try Self.file(token), "--client-id", Self.clientID, "--jwks", try Self.file("{}"),
        ])
        #expect(badSet.status == 1 && badSet.json?["error"] == "apple_jwks_invalid")
    }

    @Test("usage errors exit 2")
    func usage() async throws {
        let token = try Self.file("x")
        #expect(try await CLITests.run(["apple", "verify-token", "--token", token, "--jwks", jwks]).status == 2)  // no client id
        #expect(try await CLITests.run(["apple", "verify-token", "--client-id", "c", "--jwks", jwks]).status == 2)  // no token
        #expect(try await CLITests.run(["apple", "verify-token", "--token", token, "--client-id", "c"]).status == 2)  // no jwks
        #expect(try await CLITests.run(["apple", "verify-token", "--token", "/nonexistent", "--client-id", "c", "--jwks", jwks]).status == 2)
        #expect(try await CLITests.run(["apple", "verify-token", "--token", token, "--client-id", "c", "--jwks", jwks, "--at", "yesterday"]).status == 2)
        #expect(try await CLITests.run(["apple", "frobnicate"]).status == 2)
    }
}
