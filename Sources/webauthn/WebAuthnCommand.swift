import ArgumentParser
import Foundation
import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The `webauthn` command-line tool. Exit codes: 0 success, 1 a verification
/// failed (JSON on stdout says why), 2 a usage error.
@main
struct WebAuthnCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webauthn",
        abstract:
            "Serve the relying party, verify WebAuthn registrations and authentications, inspect responses, check metadata, verify Sign in with Apple tokens. (Conformance runs and the demo: webauthn-dev; loadtest runs webauthn-dev's; the benchmark: webauthn-bench.)",
        subcommands: [Serve.self, Verify.self, Inspect.self, MetadataCommand.self, AppleCommand.self, LoadTestPassThrough.self]
    )

    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let failure as VerificationFailure {
            Output.print(failure.json)
            Foundation.exit(1)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)
            }
            Output.line(fullMessage(for: error), keepingLineBreaks: true)
            // Usage errors (ArgumentParser says 64) exit 2, as the CLI contract promises.
            Foundation.exit(code == .validationFailure || error is ValidationError ? 2 : code.rawValue == 1 ? 1 : 2)
        }
    }
}

/// A verification failure, printed as `{"status":"failed",...}` with exit 1.
struct VerificationFailure: Error {
    let error: WebAuthnError
    var json: JSONValue {
        ["status": "failed", "error": .string(error.code.rawValue), "message": .string(error.message)]
    }
}

enum Output {
    static func print(_ value: JSONValue) {
        FileHandle.standardOutput.write(Data((value.serialized() + "\n").utf8))
    }

    static func warn(_ message: String) {
        line("webauthn: " + message)
    }

    /// Writes `text` as one line on standard error, its control and bidirectional characters
    /// escaped: messages quote what the input held (a duplicate JSON member's name, a JWS `alg`),
    /// and an escape sequence in one set the terminal's title, cleared the screen and printed a
    /// forged line (red team, sixteenth pass). The JSON on standard output escapes them itself.
    /// `keepingLineBreaks`: the text's own line breaks stay (a usage message's lines, the
    /// operator's own arguments quoted); every other such character is escaped.
    static func line(_ text: String, keepingLineBreaks: Bool = false) {
        let lines = keepingLineBreaks ? text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) : [text]
        FileHandle.standardError.write(Data((lines.map(ServerLogHandler.escaped).joined(separator: "\n") + "\n").utf8))
    }
}

/// The largest PEM certificate file read (`--metadata-root`, `--mds-root`).
let maxCertificateFile = 64 * 1024
/// The largest CRL file read (`--metadata-crl`; FIDO's are a few hundred bytes).
let maxCRLFile = 4 << 20
/// The largest input file read (a response, an attestation object, a token, a key set): a few times
/// the largest the decoders take (64 KiB of JSON, 256 KiB of CBOR as base64url), so that a file
/// of another kind is refused before it is decoded (red team: 16 MiB of invalid UTF-8 held 214 MB).
let maxInputFile = 1 << 20

/// Reads a file argument of at most ``maxInputFile`` bytes, `-` meaning standard input.
func readInput(_ path: String) throws -> [UInt8] {
    if path == "-" {
        let data = (try? FileHandle.standardInput.read(upToCount: maxInputFile + 1)) ?? Data()
        guard data.count <= maxInputFile else { throw ValidationError("standard input is larger than \(maxInputFile >> 20) MiB") }
        return [UInt8](data)
    }
    guard let data = AtomicFile.read(path, limit: maxInputFile) else {
        throw ValidationError("cannot read \(path) (or it is larger than \(maxInputFile >> 20) MiB)")
    }
    return data
}
