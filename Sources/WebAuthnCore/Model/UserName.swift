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
///   letters (and digits other than 0–9, and a script's own combining marks)
///   from one of the scripts recommended for identifiers (UAX #31, table 5),
///   Latin beside Han, kana, Hangul and Bopomofo allowed; no letter of another
///   script; at most 30 combining marks in a row; 1 to 64 characters, at most
///   256 bytes of UTF-8.
/// - **displayName** (RFC 8266 Nickname): spaces of every kind mapped to
///   U+0020, leading and trailing spaces removed, runs collapsed, then NFKC;
///   no control, format, private-use or unassigned character; 1 to 64
///   characters, at most 256 bytes.
/// - **look-alike key**: NFKC; capitals that look like a Latin capital folded
///   to it; lowercased, NFKD; a dot above a soft-dotted letter dropped; small
///   letters that look like Latin letters folded to them; NFKC. Two names
///   with one key are one account (`Alice`, `alice`, `ａｌｉｃｅ`, `ᴀlice`, an
///   all-Cyrillic `аlісе`, Greek `ΑΛΙΚΕ`'s look-alikes and `ali̇ce` cannot
///   coexist). The tables are in `UserName+Lookalikes.swift`.
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
        var previousLetter: ScriptFamily?
        func script(_ scalar: Unicode.Scalar, _ what: String) throws(WebAuthnError) -> ScriptFamily {
            guard let family = ScriptFamily(scalar) else {
                throw invalid("the name contains U+\(hex(scalar)), a \(what) of a script not used for user names")
            }
            return family
        }
        for scalar in name.unicodeScalars {
            let p = scalar.properties
            // Invisible letters (Hangul fillers U+115F, U+3164, ...) are letters by category.
            guard !p.isDefaultIgnorableCodePoint else { throw invalid("the name contains the invisible U+\(hex(scalar))") }
            switch p.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter:
                let family = try script(scalar, "letter")
                families.insert(family)
                previousLetter = family
                continue
            case .nonspacingMark, .spacingMark, .enclosingMark:
                guard let letter = previousLetter else { throw invalid("the name has a combining mark that follows no letter (U+\(hex(scalar)))") }
                // A script's own mark only on its letters (`bobः` is a Devanagari visarga after Latin letters).
                if !ScriptFamily.isInherited(scalar), try script(scalar, "mark") != letter {
                    throw invalid("the name has a mark of another script than its letter's (U+\(hex(scalar)))")
                }
                continue
            case .decimalNumber:
                // Digits other than 0–9 belong to their script (`b୦b` is Oriya beside Latin).
                if !(0x30...0x39).contains(scalar.value) { families.insert(try script(scalar, "digit")) }
                previousLetter = nil
                continue
            default:
                previousLetter = nil
                guard (0x21...0x7E).contains(scalar.value) else {
                    throw invalid(
                        "the name contains U+\(hex(scalar)) (\(describe(p.generalCategory))); names allow letters, digits and printable ASCII, no spaces")
                }
            }
        }
        guard ScriptFamily.mayMix(families) else {
            throw invalid("the name mixes letters of \(families.map(\.rawValue).sorted().joined(separator: " and ")), which look alike")
        }
        try checkDirection(name, families)
        return name
    }

    /// RFC 5893's rule for right-to-left labels, in its part that matters here: a name with
    /// Hebrew, Arabic or Thaana letters starts with one of them and ends with one of them or a
    /// digit, so that no two names read alike once the digits and punctuation beside the letters
    /// are reordered for display (red team, eighth pass: `אב12` and `12אב`, `א-1` and `1-א`).
    static func checkDirection(_ name: String, _ families: Set<ScriptFamily>) throws(WebAuthnError) {
        guard !families.isDisjoint(with: [.hebrew, .arabic, .thaana]) else { return }
        func isRightToLeftLetter(_ s: Unicode.Scalar) -> Bool {
            guard let family = ScriptFamily(s), [.hebrew, .arabic, .thaana].contains(family) else { return false }
            return s.properties.generalCategory == .otherLetter || s.properties.generalCategory == .modifierLetter
        }
        // Marks after the last letter belong to it.
        let scalars = name.unicodeScalars.reversed().drop { $0.properties.generalCategory == .nonspacingMark }
        guard let first = name.unicodeScalars.first, isRightToLeftLetter(first), let last = scalars.first,
            isRightToLeftLetter(last) || last.properties.generalCategory == .decimalNumber
        else {
            throw invalid("a name with right-to-left letters starts with one and ends with one or a digit")
        }
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

    /// The key under which accounts are unique: letters that look like a Latin letter folded to
    /// it, before and after lowercasing (a small skeleton in the spirit of UTS #39: Cyrillic,
    /// Greek, Armenian, Lisu, Cherokee, Coptic and Canadian Syllabics homoglyphs, small capitals,
    /// dotless i, a few Latin letters and ligatures), so `ѕсоре`, `ᴀdmin`, `admın`, `ΑDΜΙΝ` and
    /// `ꓮꓓꓟꓲꓠ` are the accounts `scope` and `admin`. Stores recompute the keys of existing
    /// accounts when the tables grow.
    public static func lookalikeKey(_ name: String) -> String {
        // Capitals first: lowercased, Greek `Η` (which looks like `H`) would be `η` (which looks like
        // `n`). Before NFKC too, which makes the lunate sigma `ϲ` (like `c`) a final sigma; after it
        // for capitals NFKC makes (mathematical `𝚮` is `Η`).
        func capitalsFolded(_ text: String) -> String {
            var folded = String.UnicodeScalarView()
            for scalar in text.unicodeScalars {
                if let latin = capitalLookalikes[scalar.value] { folded.append(contentsOf: latin.unicodeScalars) } else { folded.append(scalar) }
            }
            return String(folded)
        }
        // Decomposed, so that a mark is apart from its letter.
        let folded = capitalsFolded(capitalsFolded(name).precomposedStringWithCompatibilityMapping).lowercased().decomposedStringWithCompatibilityMapping
        var key = String.UnicodeScalarView()
        var afterSoftDotted = false
        for scalar in folded.unicodeScalars {
            // A dot above a letter that has one (i, j, і, ј: soft-dotted) shows nothing: `i̇` (and `İ`,
            // lowercased) is `i`; so is a dot above what folds to one (`ı̇`: red team, seventh pass).
            if scalar.value == 0x307 && afterSoftDotted { continue }
            let folded = latinLookalikes[scalar.value].map { Array($0.unicodeScalars) } ?? [scalar]
            key.append(contentsOf: folded)
            afterSoftDotted = folded.last?.properties.isSoftDotted ?? false
        }
        return String(key).precomposedStringWithCompatibilityMapping
    }

    // MARK: Internals

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
