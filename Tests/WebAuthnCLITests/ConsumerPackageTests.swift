import Foundation
import Testing

/// Another package can depend on this one by version: SwiftPM refuses a
/// versioned dependency whose products use unsafe build flags ("contains unsafe
/// build flags"), which `-Ounchecked` in the manifest was. The test makes a git
/// repository of this working tree (so it checks the code under test, committed
/// or not), tags it 1.0.0, and builds a small consumer of `WebAuthnCore` against
/// it with its own scratch directory. SwiftPM resolves every dependency of the
/// package (Hummingbird, sqlite-nio, swift-argument-parser and theirs) even for
/// one product, though it builds only WebAuthnCore and its two system libraries:
/// they come through the machine's git configuration (local mirrors here).
@Suite("Consumer package")
struct ConsumerPackageTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    struct Run {
        let status: Int32
        let output: String
    }

    /// Runs `arguments` (the first through `/usr/bin/env`) in `directory`, stdout and stderr together.
    static func run(_ arguments: [String], in directory: URL, environment: [String: String] = [:]) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }

    /// ``run(_:in:environment:)`` waited for on a thread of its own: a build of a minute must not
    /// hold one of the cooperative pool's threads (two here), which every other test of the
    /// process needs (a loaded CI run starved another suite's timed check for 35 s).
    static func runDetached(_ arguments: [String], in directory: URL, environment: [String: String] = [:]) async throws -> Run {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try run(arguments, in: directory, environment: environment) }) }.start()
        }
    }

    /// A git repository in `destination` holding the working tree's tracked and
    /// untracked (not ignored) files, committed and tagged `tag`.
    static func taggedSnapshot(of source: URL, at destination: URL, tag: String) throws {
        let listed = try run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], in: source)
        #expect(listed.status == 0, "git ls-files: \(listed.output)")
        let files = Set(listed.output.split(separator: "\0").map(String.init))
        let manager = FileManager.default
        for file in files.sorted() {
            let from = source.appendingPathComponent(file), to = destination.appendingPathComponent(file)
            guard manager.fileExists(atPath: from.path) else { continue }  // deleted in the working tree
            try manager.createDirectory(at: to.deletingLastPathComponent(), withIntermediateDirectories: true)
            try manager.copyItem(at: from, to: to)
        }
        let identity = [
            "GIT_AUTHOR_NAME": "consumer test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
            "GIT_COMMITTER_NAME": "consumer test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
        ]
        for step in [["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "snapshot"], ["git", "tag", tag]] {
            let result = try run(step, in: destination, environment: identity)
            #expect(result.status == 0, "\(step.joined(separator: " ")): \(result.output)")
        }
    }

    @Test(
        "a package that depends on WebAuthnCore from: \"1.0.0\" builds (no unsafe build flags), runs the README example, and cannot reach package types",
        .timeLimit(.minutes(20)))
    func consumerBuilds() async throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("webauthn-consumer-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let library = work.appendingPathComponent("swift-webauthn-engine")
        try Self.taggedSnapshot(of: Self.root, at: library, tag: "1.0.0")

        let consumer = work.appendingPathComponent("consumer")
        let sources = consumer.appendingPathComponent("Sources/Consumer")
        try FileManager.default.createDirectory(at: sources, withIntermediateDirectories: true)
        try """
        // swift-tools-version:6.0
        import PackageDescription

        let package = Package(
            name: "Consumer",
            dependencies: [.package(url: "\(library.absoluteString)", from: "1.0.0")],
            targets: [
                .executableTarget(name: "Consumer", dependencies: [
                    .product(name: "WebAuthnCore", package: "swift-webauthn-engine"),
                    .product(name: "WebAuthnTesting", package: "swift-webauthn-engine"),
                ]),
                .executableTarget(name: "Hidden", dependencies: [.product(name: "WebAuthnCore", package: "swift-webauthn-engine")]),
            ]
        )
        """.write(to: consumer.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        try Self.readmeExample().write(to: sources.appendingPathComponent("main.swift"), atomically: true, encoding: .utf8)
        // What is not API must not be reachable: each of these names is `package` in the engine.
        let hidden = consumer.appendingPathComponent("Sources/Hidden")
        try FileManager.default.createDirectory(at: hidden, withIntermediateDirectories: true)
        try (["import WebAuthnCore"] + Self.hiddenNames.map { "print(\($0).self)" }).joined(separator: "\n")
            .write(to: hidden.appendingPathComponent("main.swift"), atomically: true, encoding: .utf8)

        let scratch = ["--scratch-path", work.appendingPathComponent("build").path]
        let resolved = try await Self.runDetached(["swift", "package"] + scratch + ["resolve"], in: consumer)
        #expect(resolved.status == 0, "swift package resolve: \(resolved.output.suffix(2000))")
        #expect(!resolved.output.contains("unsafe build flags"))
        let built = try await Self.runDetached(["swift", "build"] + scratch + ["--product", "Consumer"], in: consumer)
        #expect(built.status == 0, "swift build: \(built.output.suffix(3000))")
        #expect(!built.output.contains("unsafe build flags"))
        guard built.status == 0 else { return }
        let ran = try await Self.runDetached(["swift", "run", "--skip-build"] + scratch + ["Consumer"], in: consumer)
        #expect(ran.output.contains("signed in true"), "\(ran.output.suffix(1000))")
        let refused = try await Self.runDetached(["swift", "build"] + scratch + ["--product", "Hidden"], in: consumer)
        #expect(refused.status != 0)
        for name in Self.hiddenNames {
            #expect(refused.output.contains("cannot find '\(name)' in scope"), "\(name) is reachable from WebAuthnCore")
        }
    }

    /// Internal types that once were public and collide with swift-crypto and others.
    static let hiddenNames = ["JSONValue", "CBOR", "PublicKey", "Digest", "Base64URL", "X509Certificate", "SigningKey", "DER"]

    /// README.md's library example, verbatim, with a software authenticator on
    /// the two lines where the browser answers.
    static func readmeExample() throws -> String {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let section = readme.range(of: "## Using the library\n\n```swift\n"),
            let end = readme.range(of: "\n```\n", range: section.upperBound..<readme.endIndex)
        else {
            Issue.record("README.md has no library example")
            return ""
        }
        var code = String(readme[section.upperBound..<end.lowerBound])
        // The README shows the same browser lines to its readers, under SoftwareAuthenticator.
        for line in [browserLine, registrationLine, assertionLine] {
            #expect(readme.contains("  " + line + "\n"), "README.md no longer shows: \(line)")
        }
        let registration = "// ... the browser answers with credential.toJSON(): registrationBody ..."
        let assertion = "// ... the browser answers with credential.toJSON(): assertionBody ..."
        #expect(code.contains(registration) && code.contains(assertion), "the README example lost its browser lines")
        code = code.replacingOccurrences(of: "import WebAuthnCore\n", with: "import WebAuthnCore\nimport WebAuthnTesting\n\(browserLine)\n")
        code = code.replacingOccurrences(of: registration, with: registrationLine)
        code = code.replacingOccurrences(of: assertion, with: assertionLine)
        return code + "\n_ = optionsJSON\n"
    }

    static let browserLine = "let browser = SoftwareAuthenticator()"
    static let registrationLine = """
        let registrationBody = try browser.register(rpId: rp.id, origin: "https://example.com", challenge: creation.challenge, userHandle: user.id).jsonBytes
        """
    static let assertionLine = """
        let assertionBody = try browser.authenticate(rpId: rp.id, origin: "https://example.com", challenge: request.challenge, credentialId: registered.credential.id).jsonBytes
        """
}
