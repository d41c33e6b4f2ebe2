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
            ("李小龍", "李小龍"), ("Ωμέγα", "Ωμέγα"), ("Ωmega-is-mixed", ""), ("tanaka太郎", "tanaka太郎"), ("राम१", "राम१"), ("ყო", "ყო"),
            ("\u{5D0}\u{5D1}12", "\u{5D0}\u{5D1}12"),
            ("\u{5D0}-1", "\u{5D0}-1"), ("\u{628}\u{627}\u{628}7", "\u{628}\u{627}\u{628}7"), ("\u{634}\u{64E}", "\u{634}\u{64E}"),
            ("Δ-1", "Δ-1"),
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
            // Red team, sixth pass: letters of scripts outside the families beside Latin, and digits other than 0–9.
            "a\u{16C1}ice", "a\u{2D4F}ice", "sa\u{10DD}", "b\u{B66}b", "b\u{966}b", "b\u{1040}b", "hell\u{C66}", "Δ\u{1040}",
            // Seventh pass: whole names in scripts not recommended for identifiers, and marks of another script.
            "\u{16D2}\u{16C1}\u{16B1}", "\u{1030F}\u{10315}\u{10309}\u{10314}", "\u{10280}\u{10282}", "\u{13D5}\u{13AA}\u{13D4}",
            "\u{15B4}\u{15E9}\u{15EA}", "\u{2CA9}\u{2C9F}", "\u{A4EE}\u{A4F8}\u{A4E2}", "bob\u{903}", "bob\u{F35}", "\u{1D41A}lice",
            // Eighth pass: right-to-left names that read like another once reordered (RFC 5893).
            "12\u{5D0}\u{5D1}", "1-\u{5D0}", "7\u{628}\u{627}\u{628}", "\u{5D0}-", "-\u{5D0}",
        ])
    func refused(raw: String) {
        #expect(errorCode { _ = try UserName.normalize(name: raw) } == "username_invalid", "\(raw.unicodeScalars.map { String($0.value, radix: 16) })")
    }

    @Test("display names: spaces collapsed and trimmed, NFKC, no controls")
    func displayNames() throws {
        #expect(try UserName.normalize(displayName: "  Alice \u{3000}  Smith ") == "Alice Smith")
        #expect(try UserName.normalize(displayName: "ﬁne") == "fine")
        // Marks on a letter, up to four, pass: Vietnamese, Devanagari, a strike-through.
        #expect(try UserName.normalize(displayName: "Nguyễn Thị") == "Nguyễn Thị")
        #expect(try UserName.normalize(displayName: "देवनागरी") == "देवनागरी")
        #expect(try UserName.normalize(displayName: "q\u{0336}\u{0336}\u{0336}\u{0336}") == "q\u{0336}\u{0336}\u{0336}\u{0336}")
        for bad in [
            "Al\u{0}ice", "\u{202E}x", "   ", "a\u{7}", "Al\u{2800}ice", "\u{2800}", "\u{1D159}", "a\u{1D159}b", "x\u{16FE4}",
            "\u{0301}\u{0301}", "Bob \u{0301}", "\u{20DD}", "a" + String(repeating: "\u{0336}", count: 5),
        ] {
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
        // Red team, sixth pass: each pair made two accounts.
        for (one, other) in [
            ("ΗΟΜΕ59780", "HOME59780"), ("ΗΙΚΕ", "hike"), ("ΤΟΥ", "toy"), ("ΝΟΤΕ", "note"), ("ᗷᗝᗷ", "BOB"), ("ᑕᗩᖇ", "CAR"), ("ⲥⲟⲣⲉ", "cope"),
            ("ореп", "open"), ("a\u{1C0}ice", "alice"), ("bob\u{1C3}", "bob!"), ("o\u{2BC}neil", "o'neil"), ("b\u{A74F}k", "book"),
            ("m\u{1D11}\u{1D11}n", "moon"), ("a\u{2A3}e", "adze"), ("ali\u{307}ce", "alice"), ("\u{130}stanbul", "istanbul"), ("ΟΔΟΣ", "οδος"),
            ("x\u{30FC}y", "x-y"), ("x\u{4E00}y", "x-y"), ("straße", "strasse"), ("ΑΛΙΚΕ", "αλικε"),
            // Seventh pass.
            ("al\u{131}\u{307}ce", "alice"), ("\u{237}\u{307}ay", "jay"), ("\u{3B9}\u{307}\u{3BF}", "io"), ("x\u{3161}y", "x-y"),
            ("x\u{3127}y", "x-y"), ("a\u{3163}ice", "alice"), ("a\u{4E28}ice", "alice"), ("a\u{4E8C}b", "a=b"), ("a\u{30CE}b", "a/b"),
            ("\u{1C1}ama", "llama"), ("o\u{A78C}neil", "o'neil"), ("o\u{2C8}neil", "o'neil"), ("o\u{2B9}neil", "o'neil"), ("a\u{2D0}b", "a:b"),
            ("a\u{A7FE}ice", "alice"), ("b\u{25C}", "b3"), ("\u{1DD}v\u{1DD}", "eve"), ("\u{3DC}ΟΧ", "FOX"), ("\u{50C}ОТ", "GOT"),
            ("\u{54F}\u{555}\u{54D}", "SOU"), ("ΣΟΣ", "\u{1A9}O\u{1A9}"), ("ε123", "\u{25B}123"), ("γο", "\u{263}o"), ("φο", "\u{278}o"),
            ("ΠΟ", "ПО"), ("ΘΟ", "\u{472}О"), ("ΦΟ", "ФО"),
        ] {
            #expect(UserName.lookalikeKey(one) == UserName.lookalikeKey(other), "\(one) and \(other)")
        }
        // Marks that show stay apart: `émile` is not `emile`.
        #expect(UserName.lookalikeKey("émile") != UserName.lookalikeKey("emile"))
        // Real Cyrillic words stay apart from Latin gibberish unless every letter folds.
        #expect(UserName.lookalikeKey("иван") != UserName.lookalikeKey("nbah"))
    }

    @Test("the ASCII shortcuts (normal forms, enforced names, look-alike keys) give what the full rules give")
    func asciiShortcuts() {
        var rng = SystemRandomNumberGenerator()
        func random(_ bytes: ClosedRange<UInt8>, length: ClosedRange<Int>) -> String {
            String((0..<Int.random(in: length, using: &rng)).map { _ in Character(Unicode.Scalar(UInt8.random(in: bytes, using: &rng))) })
        }
        var samples = (0...0x7F).map { String(Unicode.Scalar(UInt8($0))) }
        samples += ["alice", "Bob@example.com", "user_1234", "a`b", "x|y", "rn", "rnoon", "aIice", "b0b", "I1l|", "", " alice", "\u{7F}x"]
        samples += [String(repeating: "a", count: 64), String(repeating: "a", count: 65)]
        for _ in 0..<300 { samples.append(random(0...0x7F, length: 0...70)) }
        for _ in 0..<300 { samples.append(random(0x21...0x7E, length: 1...64)) }
        var keyed = 0
        for s in samples {
            #expect(UserName.isASCII(s))
            #expect(UserName.nfc(s) == s.precomposedStringWithCanonicalMapping && UserName.nfd(s) == s.decomposedStringWithCanonicalMapping)
            #expect(UserName.nfkc(s) == s.precomposedStringWithCompatibilityMapping && UserName.nfkd(s) == s.decomposedStringWithCompatibilityMapping)
            if let key = UserName.asciiLookalikeKey(s) {
                keyed += 1
                #expect(key == UserName.lookalikeKeyInFull(s), "\(s.debugDescription)")
            }
            #expect(UserName.lookalikeKey(s) == UserName.lookalikeKeyInFull(s), "\(s.debugDescription)")
            let short: Result<String, WebAuthnError> = Result { () throws(WebAuthnError) in try UserName.normalize(name: s) }
            let full: Result<String, WebAuthnError> = Result { () throws(WebAuthnError) in try UserName.normalizeInFull(name: s) }
            #expect(short.map { $0 } == full.map { $0 } || (try? short.get()) == nil && (try? full.get()) == nil, "\(s.debugDescription)")
            #expect(UserName.isPlainASCIIName(s) == ((try? full.get()) == s), "\(s.debugDescription)")
        }
        // The shortcut serves common names; one byte past ASCII takes the full path.
        #expect(UserName.asciiLookalikeKey("alice") == UserName.lookalikeKeyInFull("alice") && UserName.asciiLookalikeKey("Bob@example.com") != nil)
        #expect(keyed > samples.count / 2)
        #expect(!UserName.isASCII("e\u{301}") && !UserName.isASCII("\u{80}") && UserName.asciiLookalikeKey("al\u{131}ce") == nil)
        #expect(UserName.nfc("e\u{301}mile") == "\u{E9}mile" && UserName.nfd("\u{E9}mile") == "e\u{301}mile")
        #expect(UserName.nfkc("\u{FB01}x") == "fix" && UserName.nfkd("\u{FF41}\u{E9}") == "ae\u{301}")
    }
}
