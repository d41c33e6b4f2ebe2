import ArgumentParser
import Foundation
import SignInWithApple
import WebAuthnCore
import WebAuthnTesting

/// Serves the Sign in with Apple stand-in (WebAuthnTesting's `AppleStandIn`) on
/// 127.0.0.1 until stopped, so that a browser can go through the web flow of a
/// `webauthn serve` started with `--apple-base-url` pointing at it. Loopback only;
/// it checks client secrets signed with the same `.p8` key the server is given.
struct AppleStandInCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apple-stand-in",
        abstract: "Serve a stand-in for Apple's Sign in with Apple endpoints on 127.0.0.1 (for tests of the web flow).")

    @Option(name: .customLong("client-id"), help: "A client id the stand-in accepts (repeatable).") var clientIDs: [String] = []
    @Option(name: .customLong("team-id"), help: "The team id client secrets must carry.") var teamID: String
    @Option(name: .customLong("key-id"), help: "The key id client secrets must name.") var keyID: String
    @Option(name: .customLong("private-key"), help: "The .p8 (PKCS#8 P-256) key the server signs client secrets with.") var privateKey: String
    @Option(help: "The sub of the user the authorize page signs in (random when not given).") var sub: String?
    @Option(help: "The email of that user.") var email = "user@example.com"

    func validate() throws {
        guard !clientIDs.isEmpty else { throw ValidationError("give at least one --client-id") }
    }

    func run() async throws {
        guard let pem = FileManager.default.contents(atPath: privateKey), pem.count <= 16 * 1024 else {
            throw ValidationError("--private-key \(privateKey) cannot be read (or is larger than 16 KiB)")
        }
        let credentials = try AppleClientCredentials(
            teamID: teamID, keyID: keyID, privateKey: ApplePrivateKey(pem: String(decoding: pem, as: UTF8.self)))
        let standIn = try AppleStandIn(credentials: credentials, clientIDs: clientIDs)
        standIn.setAuthorizeUser(AppleStandIn.User(sub: sub, email: email), firstConsent: true)
        let port = try standIn.start()
        // Unbuffered: the test reads this line to learn the port.
        FileHandle.standardOutput.write(Data("listening on 127.0.0.1:\(port)\n".utf8))
        // Serve until the process is stopped.
        while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        standIn.stop()
    }
}
