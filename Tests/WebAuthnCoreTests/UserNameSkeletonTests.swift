import Foundation
import Testing
@testable import WebAuthnCore
import _WebAuthnEncoding

/// The look-alike key against its sources: UTS #39's `confusables.txt`, this project's additions,
/// and the pairs the red team registered as two accounts (TestVectors/unicode).
@Suite("User names: skeleton")
struct UserNameSkeletonTests {
    /// `source ; target ; ...` lines of a confusables file, as strings.
    static func pairs(_ file: String) throws -> [(String, String)] {
        let text = try String(contentsOf: Vectors.root.appendingPathComponent("unicode/\(file)"), encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0].split(separator: ";")
            guard fields.count >= 2 else { return nil }
            func string(_ field: Substring) -> String {
                String(
                    String.UnicodeScalarView(
                        field.split(separator: " ").compactMap { UInt32($0.trimmingCharacters(in: .whitespaces), radix: 16).flatMap(Unicode.Scalar.init) }))
            }
            return (string(fields[0]), string(fields[1]))
        }
    }

    static func hex(_ s: String) -> String { s.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: " ") }

    static func isCompatibilityForm(_ s: String) -> Bool { s.precomposedStringWithCompatibilityMapping != s.precomposedStringWithCanonicalMapping }

    @Test("every pair of confusables.txt and the additions has one key (names cannot hold a compatibility form)")
    func confusablesData() throws {
        let data = try Self.pairs("confusables.txt"), additions = try Self.pairs("additions.txt")
        #expect(data.count > 6000, "\(data.count) pairs in confusables.txt")
        #expect(additions.count > 200, "\(additions.count) additions")
        var checked = 0
        var apart: [String] = [], sequences: [String] = []
        for (source, target) in data + additions where !Self.isCompatibilityForm(source) {
            checked += 1
            guard UserName.lookalikeKey(source) != UserName.lookalikeKey(target) else { continue }
            // A table maps scalars: a sequence cannot be the image of a sequence of another length
            // (`ώ` and `ῴ`, `Ǿ` and `Ó̸`). generate.py lists these; they must stay that few.
            let lengths = [source, target].map {
                $0.decomposedStringWithCompatibilityMapping.lowercased().decomposedStringWithCanonicalMapping.unicodeScalars.count
            }
            if lengths[0] > 1, lengths[1] > 1, lengths[0] != lengths[1] {
                sequences.append(Self.hex(source))
            } else {
                apart.append("\(Self.hex(source)) → \(Self.hex(target))")
            }
        }
        #expect(checked > 3500, "\(checked) pairs checked")
        #expect(apart.isEmpty, "\(apart.count) pairs apart: \(apart.prefix(20).joined(separator: "; "))")
        #expect(sequences.count <= 2, "sequences apart: \(sequences)")
    }

    @Test("the red team's pairs (eighth pass) are one account: one name refused, or one key")
    func redTeamPairs() throws {
        let file = Vectors.load("unicode/red-team-pairs.json")
        let pairs = try #require(file["pairs"]?.arrayValue)
        #expect(pairs.count >= 150)
        for pair in pairs {
            let a = try #require(pair["a"]?.stringValue) + "59780", b = try #require(pair["b"]?.stringValue) + "59780"
            let what = pair["what"]?.stringValue ?? ""
            guard let one = try? UserName.normalize(name: a), let other = try? UserName.normalize(name: b) else { continue }
            if pair["verdict"]?.stringValue == "distinct" {
                #expect(UserName.lookalikeKey(one) != UserName.lookalikeKey(other), "\(what): one account")
            } else {
                #expect(UserName.lookalikeKey(one) == UserName.lookalikeKey(other), "\(what): \(Self.hex(a)) and \(Self.hex(b)) are two accounts")
            }
        }
    }

    @Test("ASCII look-alikes: I and l and 1, O and 0, rn and m; letters that differ stay apart")
    func ascii() {
        for (one, other) in [("aIice", "alice"), ("BILL", "bill"), ("b1ll", "bill"), ("b0b", "bob"), ("rnoon", "moon"), ("straße", "strasse")] {
            #expect(UserName.lookalikeKey(one) == UserName.lookalikeKey(other), "\(one) and \(other)")
        }
        let letters = "abcdefghjkmnpqrstuvwxyz23456789".map(String.init)
        #expect(Set(letters.map(UserName.lookalikeKey)).count == letters.count, "no two other ASCII letters or digits are one")
        #expect(UserName.lookalikeKey("test5") != UserName.lookalikeKey("tests"))
    }

    @Test("the capitals key: names the look-alike key splits by case (Борис, борис) share it; every letter's cases share it")
    func capitalsKey() throws {
        for (small, capital) in [("борис", "Борис"), ("глеб", "Глеб"), ("юлия", "Юлия"), ("βeta", "Βeta"), ("νικος", "ΝΙΚΟΣ")] {
            #expect(UserName.lookalikeKey(small) != UserName.lookalikeKey(capital), "the look-alike key alone splits \(capital)")
            #expect(UserName.capitalsKey(small) == UserName.capitalsKey(capital), "\(small) and \(capital)")
        }
        #expect(UserName.lookalikeKey("Βeta") == UserName.lookalikeKey("beta"), "a capital's look-alike stays in the look-alike key")
        // Red team, ninth pass: `ῇςεν` and its title-case form `ῌ͂ςεν` (the capital of one puts the
        // perispomeni on the eta, of the other on the iota).
        #expect(UserName.capitalsKey("\u{1FC7}\u{3C2}\u{3B5}\u{3BD}") == UserName.capitalsKey("\u{1FCC}\u{342}\u{3C2}\u{3B5}\u{3BD}"))
        // Every cased letter, alone and with each mark Greek, Latin and Cyrillic letters take: the
        // name with its letters (decomposed) in small, capital or title case, marks kept, and the
        // whole name in small letters and in capitals (each as a name would be normalised) share the key.
        func mapped(_ name: String, _ mapping: (Unicode.Scalar.Properties) -> String) -> String {
            String(
                String.UnicodeScalarView(
                    name.decomposedStringWithCanonicalMapping.unicodeScalars.flatMap { scalar in
                        let image = mapping(scalar.properties).unicodeScalars
                        return image.count == 1 ? Array(image) : [scalar]
                    }))
        }
        var checked = 0
        for value in UInt32(0x41)...0x2FFF {
            guard let scalar = Unicode.Scalar(value), scalar.properties.changesWhenCaseMapped else { continue }
            for mark in ["", "\u{300}", "\u{301}", "\u{308}", "\u{313}", "\u{342}", "\u{345}"] {
                guard let name = try? UserName.normalize(name: String(scalar) + mark) else { continue }
                let key = UserName.capitalsKey(name)
                let decomposed = name.decomposedStringWithCanonicalMapping
                let variants = [
                    mapped(name, \.lowercaseMapping), mapped(name, \.uppercaseMapping), mapped(name, \.titlecaseMapping),
                    decomposed.lowercased(), decomposed.uppercased(),
                ]
                for other in variants {
                    guard let variant = try? UserName.normalize(name: other) else { continue }
                    #expect(UserName.capitalsKey(variant) == key, "\(Self.hex(name)) and \(Self.hex(variant))")
                }
                checked += 1
            }
        }
        #expect(checked > 3000, "\(checked) cased letters with marks")
    }

    @Test(
        "names with overlay, repeated or piled marks, compatibility forms or the tatweel are refused",
        arguments: [
            "o\u{338}", "l\u{337}ove", "d\u{335}an", "e\u{301}\u{301}", "a\u{300}\u{301}\u{302}\u{303}\u{304}", "\u{17F}oo", "\u{FB01}sh", "\u{AA}na",
            "\u{628}\u{640}\u{64A}\u{62A}", "\u{3147}\u{3147}", "x\u{2460}", "\u{3F2}\u{3BF}\u{3BF}\u{3BA}", "\u{66E}\u{307}", "\u{5D5}\u{301}",
        ])
    func refusedMarks(raw: String) {
        #expect(errorCode { _ = try UserName.normalize(name: raw) } == "username_invalid", "\(raw.unicodeScalars.map { String($0.value, radix: 16) })")
    }

    @Test("half-width forms are mapped (RFC 8265 width mapping); Vietnamese keeps its two marks")
    func widthMapped() throws {
        #expect(try UserName.normalize(name: "\u{FF76}\u{FF80}") == "\u{30AB}\u{30BF}")
        #expect(try UserName.normalize(name: "Nguy\u{1EC5}n") == "Nguy\u{1EC5}n")
    }
}
