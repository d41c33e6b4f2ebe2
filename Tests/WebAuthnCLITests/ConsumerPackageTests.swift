import Foundation
import Testing
import _WebAuthnEncoding

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
        let identity = ["GIT_AUTHOR_NAME": "consumer test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
                        "GIT_COMMITTER_NAME": "consumer test", "GIT_COMMITTER_EMAIL": "test@example.invalid"]
        for step in [["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "snapshot"], ["git", "tag", tag]] {
            let result = try run(step, in: destination, environment: identity)
            #expect(result.status == 0, "\(step.joined(separator: " ")): \(result.output)")
        }
    }

    @Test("a package that depends on WebAuthnCore from: \"1.0.0\" resolves and builds (no unsafe build flags)",
          .timeLimit(.minutes(20)))
    func consumerBuilds() throws {
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
                .executableTarget(name: "Consumer", dependencies: [.product(name: "WebAuthnCore", package: "swift-webauthn-engine")]),
            ]
        )
        """.write(to: consumer.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        try """
        import WebAuthnCore

        let policy = VerificationPolicy(userVerification: .required)
        print(Base64URL.encode([0xfb, 0xff]), policy.userVerification.rawValue)
        """.write(to: sources.appendingPathComponent("main.swift"), atomically: true, encoding: .utf8)

        let scratch = ["--scratch-path", work.appendingPathComponent("build").path]
        let resolved = try Self.run(["swift", "package"] + scratch + ["resolve"], in: consumer)
        #expect(resolved.status == 0, "swift package resolve: \(resolved.output.suffix(2000))")
        #expect(!resolved.output.contains("unsafe build flags"))
        let built = try Self.run(["swift", "build"] + scratch + ["--product", "Consumer"], in: consumer)
        #expect(built.status == 0, "swift build: \(built.output.suffix(3000))")
        #expect(!built.output.contains("unsafe build flags"))
        guard built.status == 0 else { return }
        let ran = try Self.run(["swift", "run", "--skip-build"] + scratch + ["Consumer"], in: consumer)
        #expect(ran.output.contains("-_8 required"), "\(ran.output.suffix(1000))")
    }
}
