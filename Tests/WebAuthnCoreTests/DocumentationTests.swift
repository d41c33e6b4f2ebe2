import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

@Suite("Documentation")
struct DocumentationTests {
    static let repository = Vectors.root.deletingLastPathComponent()

    /// The one source of the error codes: the `public static let name: Self = "code"`
    /// declarations of Sources/_WebAuthnEncoding/WebAuthnError.swift, in order.
    static func declaredCodes() throws -> [(name: String, code: String)] {
        let url = repository.appendingPathComponent("Sources/_WebAuthnEncoding/WebAuthnError.swift")
        let text = try String(contentsOf: url, encoding: .utf8)
        return text.split(separator: "\n").compactMap { line -> (String, String)? in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            let prefix = "public static let "
            guard trimmed.hasPrefix(prefix), let colon = trimmed.firstIndex(of: ":") else { return nil }
            let name = String(trimmed[trimmed.index(trimmed.startIndex, offsetBy: prefix.count)..<colon])
            let rest = trimmed[colon...]
            guard rest.hasPrefix(": Self = \""), rest.hasSuffix("\"") else { return nil }
            return (name, String(rest.dropFirst(": Self = \"".count).dropLast()))
        }
    }

    @Test("WebAuthnError.Code.catalogue holds exactly the declared codes, each once, in declaration order")
    func catalogueMatchesDeclarations() throws {
        let declared = try Self.declaredCodes()
        #expect(declared.count > 60, "the declarations were not found: \(declared.count)")
        #expect(Set(declared.map(\.name)).count == declared.count, "a name is declared twice")
        #expect(Set(declared.map(\.code)).count == declared.count, "two names declare the same code")
        #expect(
            WebAuthnError.Code.catalogue.map(\.rawValue) == declared.map(\.code),
            "catalogue and declarations differ: missing \(Set(declared.map(\.code)).subtracting(WebAuthnError.Code.catalogue.map(\.rawValue))), extra \(Set(WebAuthnError.Code.catalogue.map(\.rawValue)).subtracting(declared.map(\.code)))"
        )
    }

    @Test("Docs/Errors.md documents exactly the declared codes, each once")
    func errorCatalogue() throws {
        let url = Self.repository.appendingPathComponent("Docs/Errors.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        let documented = text.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `") else { return nil }
            return line.dropFirst(3).split(separator: "`").first.map(String.init)
        }
        let declared = Set(try Self.declaredCodes().map(\.code))
        #expect(Set(documented).count == documented.count, "a code is documented twice")
        #expect(Set(documented).subtracting(declared).isEmpty, "documented but not declared: \(Set(documented).subtracting(declared))")
        #expect(declared.subtracting(documented).isEmpty, "declared but not documented: \(declared.subtracting(documented))")
    }

    @Test("no source makes an error code from a string: every code thrown is a declared one")
    func noAdHocCodes() throws {
        let sources = Self.repository.appendingPathComponent("Sources")
        let files =
            FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" && $0.lastPathComponent != "WebAuthnError.swift" } ?? []
        #expect(files.count > 50)
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for pattern in [#"WebAuthnError\(\s*""#, #"Code\(rawValue:"#, #"Code\(stringLiteral:"#] {
                #expect(text.range(of: pattern, options: .regularExpression) == nil, "\(file.lastPathComponent) makes a code with \(pattern)")
            }
        }
    }

    @Test("README's mounting example is the one EmbeddingTests runs, line for line")
    func mountingExampleIsTested() throws {
        let root = Vectors.root.deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let test = try String(contentsOf: root.appendingPathComponent("Tests/WebAuthnServerTests/EmbeddingTests.swift"), encoding: .utf8)
        let lines = test.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex { $0.contains("// --- README: mount ---") })
        let end = try #require(lines[start...].firstIndex { $0.contains("// --- end ---") })
        let region = lines[(start + 1)..<end].map { String($0.dropFirst(8)) }.joined(separator: "\n")
        #expect(region.count > 200)
        #expect(readme.contains(region), "README.md's mounting example differs from EmbeddingTests")
    }

    @Test("every public declaration is documented (swift-format's AllPublicDeclarationsHaveDocumentation)")
    func everyPublicDeclarationIsDocumented() async throws {
        let configuration = try String(contentsOf: Self.repository.appendingPathComponent(".swift-format"), encoding: .utf8)
        #expect(configuration.contains(#""AllPublicDeclarationsHaveDocumentation": true"#), ".swift-format no longer enables the rule")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "swift", "format", "lint", "--configuration", Self.repository.appendingPathComponent(".swift-format").path,
            "-r", Self.repository.appendingPathComponent("Sources").path, Self.repository.appendingPathComponent("Tests").path,
            Self.repository.appendingPathComponent("Fuzz/Sources").path,
        ]
        process.currentDirectoryURL = Self.repository
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        // Read before waiting (the linter blocks once a full pipe is not drained), on a thread of its
        // own: the lint takes seconds and must not hold one of the cooperative pool's two threads,
        // which the timed tests of other suites need.
        let text = await withCheckedContinuation { continuation in
            Thread {
                let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                continuation.resume(returning: text)
            }.start()
        }
        #expect(process.terminationStatus == 0, "swift format lint failed (\(process.terminationStatus)): \(text.prefix(2000))")
        let undocumented = text.split(separator: "\n").filter { $0.contains("AllPublicDeclarationsHaveDocumentation") }
        #expect(undocumented.isEmpty, "\(undocumented.count) public declarations have no /// comment:\n\(undocumented.joined(separator: "\n"))")
        // The code stays formatted as .swift-format says: run `swift format -i -r Sources Tests Fuzz/Sources`.
        let unformatted = text.split(separator: "\n").filter { $0.contains("warning:") && !$0.contains("AllPublicDeclarationsHaveDocumentation") }
        #expect(
            unformatted.isEmpty, "\(unformatted.count) formatting warnings (swift format -i fixes them):\n\(unformatted.prefix(20).joined(separator: "\n"))")
    }
}
