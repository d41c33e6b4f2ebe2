import Foundation
import Testing

extension CLITests {
    /// The hard limit on open files, when it is finite and above the 300 the test lowers the soft one to.
    static var hardDescriptorLimit: rlim_t? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_max > 300, limit.rlim_max != rlim_t.max else { return nil }
        return limit.rlim_max
    }

    @Test("serve raises its soft descriptor limit to the hard one and caps its connections below it", .enabled(if: hardDescriptorLimit != nil))
    func descriptorLimitRaised() async throws {
        let hard = try #require(Self.hardDescriptorLimit)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("descriptors-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let log = folder + "/serve.log"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // A soft limit of 300, as a default of 1,024 would be: four addresses used to take it all.
        process.arguments = [
            "-c", "ulimit -Sn 300; exec \"$0\" \"$@\" 2>\"\(log)\"", Self.binary("webauthn").path, "serve", "--port", "0", "--rp-id", "example.com",
            "--origin", "https://example.com", "--db", "sqlite:\(folder)/db.sqlite", "--log-level", "info",
        ]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var line: Substring?
        for _ in 0..<300 where line == nil {
            try await Task.sleep(for: .milliseconds(100))
            line = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").first { $0.contains("max_connections=") }
        }
        let found = try #require(line, "no connections line in serve's log")
        // Before: the soft limit stayed at 300, and nothing capped the connections below it.
        #expect(found.contains("descriptors=\(hard)"), "\(found)")
        #expect(found.contains("max_connections=\(Int(hard) - 256)"), "\(found)")
    }

    @Test("serve warns when one address may hold every connection (--max-connections not above --max-connections-per-address)")
    func connectionCapWarned() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cap-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let log = folder + "/serve.log"
        let process = Process()
        process.executableURL = Self.binary("webauthn")
        process.arguments = [
            "serve", "--port", "0", "--rp-id", "example.com", "--origin", "https://example.com", "--db", "sqlite:\(folder)/db.sqlite",
            "--max-connections", "100",
        ]
        process.standardOutput = FileHandle.nullDevice
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var warned = false
        for _ in 0..<300 where !warned {
            try await Task.sleep(for: .milliseconds(100))
            warned = (try? String(contentsOfFile: log, encoding: .utf8))?.contains("one address can hold every connection") == true
        }
        #expect(warned, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }
}
