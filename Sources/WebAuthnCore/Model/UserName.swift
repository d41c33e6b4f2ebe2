public import Foundation
public import _WebAuthnEncoding
package import _WebAuthnCrypto

/// The rules for `user.name` and `user.displayName` (WebAuthn L3 §5.4.3
/// suggests RFC 8265 and RFC 8266), applied before anything is stored, so
/// that no two accounts look alike and no name can hide characters.
///
/// A documented subset of the PRECIS profiles:
/// - **name** (RFC 8265 UsernameCasePreserved): full-width forms mapped to
///   their ASCII equivalents, then NFC; every character an ASCII printable
///   (`!`…`~`), a letter, a digit, or a combining mark after a letter; no
///   space, control (NUL included), format (zero-width, bidi), private-use or
///   unassigned character, nor a default-ignorable one (invisible fillers);
///   letters from at most one of Latin, Greek, Cyrillic and Armenian (the
///   common homoglyph families); at most 30 combining marks in a row; 1 to
///   64 characters, at most 256 bytes of UTF-8.
/// - **displayName** (RFC 8266 Nickname): spaces of every kind mapped to
///   U+0020, leading and trailing spaces removed, runs collapsed, then NFKC;
///   no control, format, private-use or unassigned character; 1 to 64
///   characters, at most 256 bytes.
/// - **look-alike key**: NFKC, case-folded, NFKC again, then Cyrillic, Greek
///   and Armenian homoglyphs, small capitals and dotless i folded to the
///   Latin letter they look like. Two names with one key are one account
///   (`Alice`, `alice`, `ａｌｉｃｅ`, `ᴀlice` and an all-Cyrillic `аlісе`
///   cannot coexist).
public enum UserName {
    /// The longest name or display name, in Unicode scalars.
    public static let maxCharacters = 64
    /// The longest name or display name, in UTF-8 bytes.
    public static let maxBytes = 256

    /// The enforced form of a user name, or `username_invalid`.
    public static func normalize(name raw: String) throws(WebAuthnError) -> String {
        guard raw.utf8.count <= maxBytes * 4 else { throw invalid("the name is longer than \(maxBytes) bytes") }
        try checkStreamSafe(raw)
        let mapped = String(String.UnicodeScalarView(raw.unicodeScalars.map(widthMapped)))
        let name = mapped.precomposedStringWithCanonicalMapping
        try checkLength(name, what: "name")
        var families: Set<ScriptFamily> = []
        var previousWasLetter = false
        for (index, scalar) in name.unicodeScalars.enumerated() {
            let p = scalar.properties
            // Invisible letters (Hangul fillers U+115F, U+3164, ...) are letters by category.
            guard !p.isDefaultIgnorableCodePoint else { throw invalid("the name contains the invisible U+\(hex(scalar))") }
            switch p.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter:
                if let family = ScriptFamily(scalar) { families.insert(family) }
                previousWasLetter = true
                continue
            case .nonspacingMark, .spacingMark, .enclosingMark:
                guard index > 0, previousWasLetter else { throw invalid("the name has a combining mark that follows no letter (U+\(hex(scalar)))") }
                continue
            case .decimalNumber:
                previousWasLetter = false
                continue
            default:
                previousWasLetter = false
                guard (0x21...0x7E).contains(scalar.value) else {
                    throw invalid(
                        "the name contains U+\(hex(scalar)) (\(describe(p.generalCategory))); names allow letters, digits and printable ASCII, no spaces")
                }
            }
        }
        guard families.count <= 1 else {
            throw invalid("the name mixes letters of \(families.map(\.rawValue).sorted().joined(separator: " and ")), which look alike")
        }
        return name
    }

    /// The enforced form of a display name, or `username_invalid`.
    public static func normalize(displayName raw: String) throws(WebAuthnError) -> String {
        guard raw.utf8.count <= maxBytes * 4 else { throw invalid("the display name is longer than \(maxBytes) bytes") }
        try checkStreamSafe(raw)
        var scalars = String.UnicodeScalarView()
        var lastWasSpace = true  // drops leading spaces
        for scalar in raw.unicodeScalars {
            let isSpace = scalar.properties.generalCategory == .spaceSeparator
            if isSpace {
                if !lastWasSpace { scalars.append(" ") }
                lastWasSpace = true
                continue
            }
            if scalar.properties.isDefaultIgnorableCodePoint {
                throw invalid("the display name contains the invisible U+\(hex(scalar))")
            }
            switch scalar.properties.generalCategory {
            case .control, .format, .privateUse, .unassigned, .surrogate, .lineSeparator, .paragraphSeparator:
                throw invalid("the display name contains U+\(hex(scalar)) (\(describe(scalar.properties.generalCategory)))")
            default:
                scalars.append(scalar)
                lastWasSpace = false
            }
        }
        if scalars.last == " " { scalars.removeLast() }
        let name = String(scalars).precomposedStringWithCompatibilityMapping
        try checkLength(name, what: "display name")
        return name
    }

    /// The key under which accounts are unique: NFKC, case-folded, NFKC,
    /// then letters that look like a Latin letter folded to it (a small
    /// skeleton in the spirit of UTS #39: Cyrillic, Greek, Armenian, Lisu and
    /// Cherokee homoglyphs, small capitals, dotless i), so `ѕсоре`, `ᴀdmin`,
    /// `admın` and `ꓮꓓꓟꓲꓠ` are the accounts `scope` and `admin`. Stores
    /// recompute the keys of existing accounts when this table grows.
    public static func lookalikeKey(_ name: String) -> String {
        let folded = name.precomposedStringWithCompatibilityMapping.lowercased().precomposedStringWithCompatibilityMapping
        var key = String.UnicodeScalarView()
        for scalar in folded.unicodeScalars {
            if let latin = latinLookalikes[scalar.value] { key.append(latin) } else { key.append(scalar) }
        }
        return String(key)
    }

    /// Lowercase letters that render like a Latin letter, and that letter.
    static let latinLookalikes: [UInt32: Unicode.Scalar] = {
        let pairs: [(String, Character)] = [
            // Cyrillic
            ("а", "a"), ("в", "b"), ("с", "c"), ("ԁ", "d"), ("е", "e"), ("ё", "e"), ("һ", "h"), ("і", "i"), ("ї", "i"), ("ј", "j"),
            ("к", "k"), ("ӏ", "l"), ("м", "m"), ("н", "h"), ("о", "o"), ("р", "p"), ("ԛ", "q"), ("ѕ", "s"), ("т", "t"), ("џ", "u"),
            ("ѵ", "v"), ("ԝ", "w"), ("х", "x"), ("у", "y"), ("ү", "y"), ("з", "3"),
            // Greek
            ("α", "a"), ("β", "b"), ("ε", "e"), ("η", "n"), ("ι", "i"), ("κ", "k"), ("ν", "v"), ("ο", "o"), ("ρ", "p"),
            ("υ", "u"), ("χ", "x"), ("γ", "y"), ("ω", "w"), ("ζ", "z"), ("μ", "m"), ("τ", "t"),
            // Armenian
            ("օ", "o"), ("ս", "u"), ("ց", "g"), ("հ", "h"), ("ո", "n"), ("զ", "q"),
            // Latin small capitals and phonetic letters
            ("ᴀ", "a"), ("ʙ", "b"), ("ᴄ", "c"), ("ᴅ", "d"), ("ᴇ", "e"), ("ꜰ", "f"), ("ɢ", "g"), ("ʜ", "h"), ("ɪ", "i"), ("ᴊ", "j"),
            ("ᴋ", "k"), ("ʟ", "l"), ("ᴍ", "m"), ("ɴ", "n"), ("ᴏ", "o"), ("ᴘ", "p"), ("ʀ", "r"), ("ꜱ", "s"), ("ᴛ", "t"), ("ᴜ", "u"),
            ("ᴠ", "v"), ("ᴡ", "w"), ("ʏ", "y"), ("ᴢ", "z"), ("ı", "i"), ("ȷ", "j"), ("ɑ", "a"), ("ɡ", "g"), ("ɩ", "i"), ("ʋ", "u"),
            // Lisu (red team, fifth pass: `ꓮlice1` beside `alice1`)
            ("ꓮ", "a"), ("ꓐ", "b"), ("ꓚ", "c"), ("ꓓ", "d"), ("ꓰ", "e"), ("ꓝ", "f"), ("ꓖ", "g"), ("ꓧ", "h"), ("ꓲ", "i"), ("ꓙ", "j"),
            ("ꓗ", "k"), ("ꓡ", "l"), ("ꓟ", "m"), ("ꓠ", "n"), ("ꓳ", "o"), ("ꓑ", "p"), ("ꓣ", "r"), ("ꓢ", "s"), ("ꓔ", "t"), ("ꓴ", "u"),
            ("ꓦ", "v"), ("ꓪ", "w"), ("ꓫ", "x"), ("ꓬ", "y"), ("ꓜ", "z"),
            // Cherokee capitals (keyed below by their lowercase forms, as names are folded)
            ("Ꭺ", "a"), ("Ᏼ", "b"), ("Ꮟ", "b"), ("Ꮯ", "c"), ("Ꭰ", "d"), ("Ꭼ", "e"), ("Ꮐ", "g"), ("Ꮋ", "h"), ("Ꮒ", "h"), ("Ꭵ", "i"),
            ("Ꭻ", "j"), ("Ꮶ", "k"), ("Ꮮ", "l"), ("Ꮇ", "m"), ("Ꮲ", "p"), ("Ꭱ", "r"), ("Ꮪ", "s"), ("Ꭲ", "t"), ("Ꮩ", "v"), ("Ꮃ", "w"),
            ("Ꭹ", "y"), ("Ꮓ", "z"),
        ]
        var table: [UInt32: Unicode.Scalar] = [:]
        for (from, to) in pairs {
            // Folded as a name is (``lookalikeKey(_:)`` lowercases first): Cherokee capitals have lowercase forms.
            guard let f = from.lowercased().unicodeScalars.first, let t = to.unicodeScalars.first else { continue }
            table[f.value] = t
        }
        return table
    }()

    // MARK: Internals

    /// The scripts a name may not mix, because letters of each look like Latin ones. Letters of
    /// other scripts (Han, kana, Hangul, ...) belong to none, so `tanaka太郎` is one name.
    enum ScriptFamily: String {
        case latin = "Latin", greek = "Greek", cyrillic = "Cyrillic", armenian = "Armenian", lisu = "Lisu", cherokee = "Cherokee"
        case canadianSyllabics = "Canadian Syllabics", coptic = "Coptic"

        init?(_ s: Unicode.Scalar) {
            switch s.value {
            case 0x41...0x5A, 0x61...0x7A, 0xC0...0x24F, 0x250...0x2AF, 0x1D00...0x1DBF, 0x1E00...0x1EFF, 0x2C60...0x2C7F, 0xA720...0xA7FF, 0xFF21...0xFF3A,
                0xFF41...0xFF5A:
                self = .latin
            case 0x370...0x3FF, 0x1F00...0x1FFF:
                self = .greek
            case 0x400...0x52F, 0x1C80...0x1C8F, 0x2DE0...0x2DFF, 0xA640...0xA69F:
                self = .cyrillic
            case 0x531...0x58F, 0xFB13...0xFB17:
                self = .armenian
            case 0xA4D0...0xA4FF, 0x11FB0...0x11FBF:
                self = .lisu
            case 0x13A0...0x13FF, 0xAB70...0xABBF:
                self = .cherokee
            case 0x1400...0x167F, 0x18B0...0x18FF:
                self = .canadianSyllabics
            case 0x2C80...0x2CFF:
                self = .coptic
            default:
                return nil
            }
        }
    }

    /// RFC 8265 width mapping: full-width ASCII forms and the ideographic space.
    static func widthMapped(_ s: Unicode.Scalar) -> Unicode.Scalar {
        if (0xFF01...0xFF5E).contains(s.value) { return Unicode.Scalar(s.value - 0xFEE0) ?? s }
        if s.value == 0x3000 { return " " }
        return s
    }

    /// At most 30 combining marks in a row (UAX #15 stream-safe), checked
    /// before normalisation, whose cost grows with the square of such a run.
    static func checkStreamSafe(_ s: String) throws(WebAuthnError) {
        var run = 0
        for scalar in s.unicodeScalars {
            run = scalar.properties.canonicalCombiningClass.rawValue == 0 ? 0 : run + 1
            guard run <= 30 else { throw invalid("more than 30 combining marks in a row") }
        }
    }

    static func checkLength(_ name: String, what: String) throws(WebAuthnError) {
        let count = name.unicodeScalars.count
        guard count >= 1 else { throw invalid("the \(what) is empty") }
        guard count <= maxCharacters, name.utf8.count <= maxBytes else {
            throw invalid("the \(what) is longer than \(maxCharacters) characters or \(maxBytes) bytes")
        }
    }

    static func invalid(_ message: String) -> WebAuthnError { WebAuthnError(.usernameInvalid, message) }

    static func hex(_ s: Unicode.Scalar) -> String { String(format: "%04X", s.value) }

    static func describe(_ c: Unicode.GeneralCategory) -> String {
        switch c {
        case .control: return "a control character"
        case .format: return "an invisible format character"
        case .spaceSeparator, .lineSeparator, .paragraphSeparator: return "a space"
        case .privateUse: return "a private-use character"
        case .unassigned: return "an unassigned code point"
        case .surrogate: return "a surrogate"
        default: return "a symbol or punctuation outside ASCII"
        }
    }
}
