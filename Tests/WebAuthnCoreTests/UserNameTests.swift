import Foundation
import Testing
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// L3 §5.4.3: names are enforced before storage, so no two accounts look alike.
@Suite("User names")
struct UserNameTests {
    @Test(
        "names: NFC, full-width mapped, case preserved",
        arguments: [
            ("alice", "alice"), ("Alice", "Alice"), ("ａｌｉｃｅ", "alice"), ("e\u{301}mile", "\u{e9}mile"), ("bob@example.com", "bob@example.com"),
            ("李小龍", "李小龍"), ("Ωμέγα", "Ωμέγα"), ("Ωmega-is-mixed", ""),
        ])
    func accepted(raw: String, expected: String) throws {
        if expected.isEmpty {  // Greek Omega beside Latin letters: mixed scripts
            #expect(errorCode { _ = try UserName.normalize(name: raw) } == "username_invalid")
            return
        }
        #expect(try UserName.normalize(name: raw) == expected)
    }

    @Test(
        "names that could hide or impersonate are refused",
        arguments: [
            "", "ali\u{0}ce", "alice\u{0}admin", "al ice", "alice\u{200B}", "\u{202E}ecila", "alice\n", "\u{301}alice", "p\u{430}ypal",
            String(repeating: "a", count: 65), "\u{E000}x", "a\u{2028}b", "x™",
            "admin\u{3164}", "admin\u{115F}", "g\u{585}\u{585}gle", "a" + String(repeating: "\u{301}\u{323}", count: 40),
            // Red team, fifth pass: Lisu and Cherokee capitals beside Latin letters were accepted.
            "\u{A4EE}lice1", "\u{13AA}lice1", "p\u{13A2}x", "\u{1472}ob", "\u{2C9E}tto",
        ])
    func refused(raw: String) {
        #expect(errorCode { _ = try UserName.normalize(name: raw) } == "username_invalid", "\(raw.unicodeScalars.map { String($0.value, radix: 16) })")
    }

    @Test("display names: spaces collapsed and trimmed, NFKC, no controls")
    func displayNames() throws {
        #expect(try UserName.normalize(displayName: "  Alice \u{3000}  Smith ") == "Alice Smith")
        #expect(try UserName.normalize(displayName: "ﬁne") == "fine")
        for bad in ["Al\u{0}ice", "\u{202E}x", "   ", "a\u{7}"] {
            #expect(errorCode { _ = try UserName.normalize(displayName: bad) } == "username_invalid", "\(bad)")
        }
    }

    @Test("look-alike key: case and width fold to one account")
    func lookalike() {
        #expect(UserName.lookalikeKey("Alice") == UserName.lookalikeKey("alice"))
        #expect(UserName.lookalikeKey("ＡＬＩＣＥ") == UserName.lookalikeKey("alice"))
        #expect(UserName.lookalikeKey("alice") != UserName.lookalikeKey("alicia"))
        // Homoglyphs from one script, small capitals, dotless i: the Latin name's key.
        #expect(UserName.lookalikeKey("ѕсоре") == UserName.lookalikeKey("scope"))
        #expect(UserName.lookalikeKey("ᴀdmin") == UserName.lookalikeKey("admin"))
        #expect(UserName.lookalikeKey("admın") == UserName.lookalikeKey("admin"))
        #expect(UserName.lookalikeKey("ΑΚΜΕ") == UserName.lookalikeKey("akme"))
        // Whole names in Lisu or Cherokee capitals that read as Latin ones.
        #expect(UserName.lookalikeKey("\u{A4EE}\u{A4E1}\u{A4F2}\u{A4DA}\u{A4F0}") == UserName.lookalikeKey("alice"))
        #expect(UserName.lookalikeKey("\u{13AA}\u{13DE}\u{13A5}\u{13DF}\u{13AC}") == UserName.lookalikeKey("alice"))
        #expect(UserName.lookalikeKey("\u{13F4}\u{13A1}\u{13AA}\u{13E6}") == UserName.lookalikeKey("brak"))
        // Real Cyrillic words stay apart from Latin gibberish unless every letter folds.
        #expect(UserName.lookalikeKey("иван") != UserName.lookalikeKey("nbah"))
    }
}
