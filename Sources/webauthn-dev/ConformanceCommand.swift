import ArgumentParser
import Foundation
import WebAuthnConformance

/// `webauthn-dev conformance`: drives any relying party that speaks the FIDO2
/// server conformance API with a software authenticator, case by case.
struct Conformance: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the FIDO2 server conformance cases against a relying party over its conformance API.")

    @Option(parsing: .unconditional, help: "The server under test, e.g. http://127.0.0.1:8080.") var url: String
    @Option(name: .customLong("rp-id"), parsing: .unconditional, help: "The server's RP ID.") var rpId: String
    @Option(parsing: .unconditional, help: "The origin the authenticator claims.") var origin: String
    @Option(name: .customLong("metadata-out"), parsing: .unconditional, help: "Folder for the metadata statements of the runner's test authenticators.")
    var metadataOut: String
    @Flag(name: .customLong("write-metadata-only"), help: "Write the metadata statements and stop.") var writeMetadataOnly = false
    @Option(parsing: .unconditional, help: "Run only the cases whose id contains this text.") var only: String?
    @Option(parsing: .unconditional, help: "Write a per-case JSON report here.") var json: String?
    @Flag(help: "After each passing F case, print the server's refusal (its status and errorMessage).") var verbose = false

    func validate() throws {
        guard URL(string: url)?.host != nil else { throw ValidationError("--url is not a URL") }
    }

    func run() async throws {
        if writeMetadataOnly {
            let names = try ConformanceSuite.prepareMetadata(folder: metadataOut)
            print("metadata in \(metadataOut): " + names.joined(separator: ", "))
            return
        }
        let verbose = self.verbose
        let report = try await ConformanceSuite.run(
            ConformanceSuite.Options(url: url, rpId: rpId, origin: origin, metadataFolder: metadataOut, only: only)
        ) { result in
            if result.passed {
                print("PASS \(result.id)" + (verbose ? result.serverRefusal.map { " (refused: \($0))" } ?? "" : ""))
            } else {
                print("FAIL \(result.id): \(result.reason ?? "")")
            }
        }
        print("\(report.passed) passed, \(report.failed) failed")
        if let json { try Data(report.jsonBytes).write(to: URL(fileURLWithPath: json)) }
        if report.failed > 0 { throw ExitCode(1) }
    }
}
