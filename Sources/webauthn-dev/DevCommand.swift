import ArgumentParser

/// `webauthn-dev`: the tools that drive the software authenticator and test CA
/// (WebAuthnTesting). They are kept out of `webauthn`, the binary a deployment
/// runs, so that it links no testing code.
@main
struct DevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webauthn-dev",
        abstract: "Developer tools: run the FIDO2 conformance cases against a server, a demo of both ceremonies, or a stand-in for Sign in with Apple.",
        subcommands: [Conformance.self, Demo.self, LoadTest.self, AppleStandInCommand.self]
    )
}
