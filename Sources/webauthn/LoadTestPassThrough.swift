import ArgumentParser
import Foundation

/// `webauthn loadtest …`: runs `webauthn-dev loadtest …` with the same arguments. The load
/// test drives software authenticators, which the deployable binary does not link (a test
/// checks its symbols), so it lives in `webauthn-dev`; this finds that binary next to
/// `webauthn` (or on `PATH`) and replaces this process with it.
struct LoadTestPassThrough: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Load-test a running server (runs webauthn-dev loadtest, which must be installed next to webauthn or on PATH).",
        discussion: "Every argument goes to webauthn-dev loadtest; `webauthn loadtest --help` shows its options."
    )

    @Argument(parsing: .captureForPassthrough, help: "Arguments for webauthn-dev loadtest.") var arguments: [String] = []

    func run() throws {
        guard let tool = Self.developerTool() else {
            throw ValidationError(
                "webauthn loadtest runs webauthn-dev, which is neither next to webauthn nor on PATH; build it with `swift build -c release --product webauthn-dev`"
            )
        }
        let argv = [tool, "loadtest"] + arguments
        var cArguments = argv.map { strdup($0) } + [nil]
        execv(tool, &cArguments)
        // Only reached when exec failed.
        throw ValidationError("cannot run \(tool): \(String(cString: strerror(errno)))")
    }

    /// `webauthn-dev` in this executable's directory, else the first on `PATH`.
    static func developerTool() -> String? {
        let fileManager = FileManager.default
        var candidates: [String] = []
        if let own = try? fileManager.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append((own as NSString).deletingLastPathComponent + "/webauthn-dev")
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") where !directory.isEmpty {
            candidates.append(directory + "/webauthn-dev")
        }
        return candidates.first { fileManager.isExecutableFile(atPath: $0) }
    }
}
