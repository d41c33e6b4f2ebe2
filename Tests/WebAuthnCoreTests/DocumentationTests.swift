import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

@Suite("Documentation")
struct DocumentationTests {
    @Test("Docs/Errors.md documents exactly the codes of WebAuthnError.Code.catalogue")
    func errorCatalogue() throws {
        let url = Vectors.root.deletingLastPathComponent().appendingPathComponent("Docs/Errors.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        let documented = Set(text.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `") else { return nil }
            return line.dropFirst(3).split(separator: "`").first.map(String.init)
        })
        let defined = Set(WebAuthnError.Code.catalogue.map(\.rawValue))
        #expect(defined.count == WebAuthnError.Code.catalogue.count, "a code is listed twice")
        #expect(documented.subtracting(defined).isEmpty, "documented but not defined: \(documented.subtracting(defined))")
        #expect(defined.subtracting(documented).isEmpty, "defined but not documented: \(defined.subtracting(documented))")
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
}
