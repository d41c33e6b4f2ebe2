import Foundation
import Testing

extension CLITests {
    @Test("every command's help states each default once: the parser's `(default: …)` is not repeated in the text")
    func helpDefaultsOnce() async throws {
        // Adopter's review: `serve --help` read "Default 200. (default: 200)" for five options,
        // and named the database default twice.
        let commands = [
            ["serve"], ["verify", "registration"], ["verify", "authentication"], ["inspect"], ["metadata", "inspect"], ["metadata", "audit"],
            ["apple", "verify"],
        ]
        for command in commands {
            let run = try await Self.run(command + ["--help"])
            #expect(run.status == 0, "\(command): \(run.stderr)")
            // One option's help: from its flag to the next option's flag, joined into one line.
            let options = run.stdout.components(separatedBy: "\n  -").map { $0.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
                .filter { $0.contains("(default:") }
            #expect(options.count > 5 || command != ["serve"], "\(command)")
            for option in options {
                let prose = option.components(separatedBy: "(default:")[0].replacingOccurrences(of: "Default:", with: "")
                #expect(!prose.contains("Default ") && !prose.contains("(default "), "\(command): \(option)")
            }
        }
    }
}
