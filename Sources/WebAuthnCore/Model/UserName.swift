internal import Foundation
public import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// The rules for `user.name` and `user.displayName` (WebAuthn L3 §5.4.3
/// suggests RFC 8265 and RFC 8266), applied before anything is stored, so
/// that no two accounts look alike and no name can hide characters.
///
/// A documented subset of the PRECIS profiles:
/// - **name** (RFC 8265 UsernameCasePreserved): full-width and half-width
///   forms mapped to their decompositions, then NFC; every character an ASCII printable
///   (`!`…`~`), a letter, a digit, or a combining mark after a letter; no
///   space, control (NUL included), format (zero-width, bidi), private-use or
///   unassigned character, nor a default-ignorable one (invisible fillers),
///   nor one NFKC changes (PRECIS IdentifierClass: `ſ`, `ﬁ`, `ª`), nor the
///   Arabic tatweel;
///   letters (and digits other than 0–9, and a script's own combining marks)
///   from one of the scripts recommended for identifiers (UAX #31, table 5),
///   Latin beside Han, kana, Hangul and Bopomofo allowed; no letter of another
///   script; no overlay mark, no mark twice on one letter, at most four marks
///   on one letter (UTS #39 §5.4); 1 to 64 characters, at most
///   256 bytes of UTF-8.
/// - **displayName** (RFC 8266 Nickname): spaces of every kind mapped to
///   U+0020, leading and trailing spaces removed, runs collapsed, then NFKC;
///   no control, format, private-use or unassigned character; 1 to 64
///   characters, at most 256 bytes.
/// - **look-alike key**: UTS #39's skeleton of the lowercased name, with the
///   capitals whose small letter looks different folded first. Two names with
///   one key are one account (`Alice`, `alice`, `ａｌｉｃｅ`, `ᴀlice`, `aIice`,
///   an all-Cyrillic `аlісе`, Greek `ΑΛΙΚΕ`'s look-alikes and `ali̇ce` cannot
///   coexist). The tables are generated from `confusables.txt`; see
///   ``lookalikeKey(_:)``. A second key, ``capitalsKey(_:)``, is the name's in capitals:
///   names unique by both keys are unique whatever their case (`Борис`, `борис`).
public enum UserName {
    /// The longest name or display name, in Unicode scalars.
    public static let maxCharacters = 64
    /// The longest name or display name, in UTF-8 bytes.
    public static let maxBytes = 256

    /// The enforced form of a user name, or `username_invalid`.
    public static func normalize(name raw: String) throws(WebAuthnError) -> String {
        if isPlainASCIIName(raw) { return raw }
        return try normalizeInFull(name: raw)
    }

    /// ``normalize(name:)`` without its ASCII shortcut.
    static func normalizeInFull(name raw: String) throws(WebAuthnError) -> String {
        guard raw.utf8.count <= maxBytes * 4 else { throw invalid("the name is longer than \(maxBytes) bytes") }
        try checkStreamSafe(raw)
        var mapped = String.UnicodeScalarView()
        for scalar in raw.unicodeScalars { mapped.append(contentsOf: widthMapped(scalar)) }
        let name = nfc(String(mapped))
        try checkLength(name, what: "name")
        try checkMarks(name)
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
            // PRECIS IdentifierClass: no character NFKC changes (`ſ`, `ﬁ`, `ª`, mathematical letters).
            if !scalar.isASCII, String(scalar).precomposedStringWithCompatibilityMapping.unicodeScalars.elementsEqual(CollectionOfOne(scalar)) == false {
                throw invalid("the name contains U+\(hex(scalar)), a compatibility form of another character")
            }
            // The Arabic tatweel stretches a word and changes no letter (red team, eighth pass).
            guard scalar.value != 0x640 else { throw invalid("the name contains the tatweel U+0640, which only stretches a word") }
            switch p.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter:
                let family = try script(scalar, "letter")
                families.insert(family)
                previousLetter = family
                continue
            case .nonspacingMark, .spacingMark, .enclosingMark:
                guard let letter = previousLetter else { throw invalid("the name has a combining mark that follows no letter (U+\(hex(scalar)))") }
                // A script's own mark only on its letters (`bobः` is a Devanagari visarga after Latin
                // letters); the shared diacritics only on Latin, Greek and Cyrillic ones (a dot on an
                // Arabic dotless letter draws another letter: red team, eighth pass).
                if ScriptFamily.isInherited(scalar) {
                    guard [.latin, .greek, .cyrillic].contains(letter) else {
                        throw invalid("the name has the diacritic U+\(hex(scalar)) on a \(letter.rawValue) letter")
                    }
                } else if try script(scalar, "mark") != letter {
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
            // Symbols that show as nothing or a space though they are neither default-ignorable nor
            // spaces: U+2800 braille pattern blank, U+1D159 musical null notehead, U+16FE4 Khitan
            // small script filler (red team).
            if scalar.properties.isDefaultIgnorableCodePoint || [0x2800, 0x1D159, 0x16FE4].contains(scalar.value) {
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
        let name = nfkc(String(scalars))
        try checkLength(name, what: "display name")
        // Marks on something: none first or after a space, at most four on one character (UTS #39
        // §5.4): a name of marks alone showed blank, and stacked marks ran over the lines around.
        var marks = 0
        var previous: Unicode.Scalar = " "
        for scalar in name.unicodeScalars {
            if [.nonspacingMark, .spacingMark, .enclosingMark].contains(scalar.properties.generalCategory) {
                marks += 1
                if previous == " " { throw invalid("the display name has a mark on nothing (first, or after a space)") }
                if marks > 4 { throw invalid("the display name has more than four marks on one character") }
            } else {
                marks = 0
                previous = scalar
            }
        }
        return name
    }

    /// The key under which accounts are unique: UTS #39's skeleton, made case-insensitive. The
    /// name's NFKD form; capitals whose small letter looks like another letter than they do
    /// folded first (Greek `Υ` looks like `Y`, `υ` like `u`); lowercased, NFD; every scalar
    /// replaced by its image in the table made from `confusables.txt` (`UserName+Skeleton.swift`,
    /// written by `TestVectors/unicode/generate.py`); a dot above a soft-dotted letter dropped.
    /// So `ѕсоре`, `ᴀdmin`, `admın`, `ΑDΜΙΝ`, `aIice`, `rnoon` and `b0b` are the accounts `scope`,
    /// `admin`, `alice`, `moon` and `bob`. Stores recompute the keys of existing accounts when the
    /// tables change.
    public static func lookalikeKey(_ name: String) -> String {
        asciiLookalikeKey(name) ?? lookalikeKeyInFull(name)
    }

    /// ``lookalikeKey(_:)`` without its ASCII shortcut.
    static func lookalikeKeyInFull(_ name: String) -> String {
        let tables = SkeletonTables.shared
        var folded = String.UnicodeScalarView()
        for scalar in nfkd(name).unicodeScalars {
            if let image = tables.capitals[scalar.value] { folded.append(contentsOf: image) } else { folded.append(scalar) }
        }
        var key = String.UnicodeScalarView()
        var afterSoftDotted = false
        for scalar in nfd(String(folded).lowercased()).unicodeScalars {
            // A dot above a letter that has one (i, j, і, ј: soft-dotted) shows nothing: `i̇` (and `İ`,
            // lowercased) is `i`; so is a dot above what folds to one (`ı̇`: red team, seventh pass).
            if scalar.value == 0x307 && afterSoftDotted { continue }
            let image = tables.images[scalar.value] ?? [scalar]
            key.append(contentsOf: image)
            // Marks below (`ị`, `į`) sit between the letter and its dot without changing it.
            let combiningClass = scalar.properties.canonicalCombiningClass.rawValue
            if combiningClass == 0 || combiningClass == 230 { afterSoftDotted = image.last?.properties.isSoftDotted ?? false }
        }
        return nfd(String(key))
    }

    /// The second key under which accounts are unique: the look-alike key of the name in
    /// capitals. A capital and its small letter can look like two different letters (Greek `Β`
    /// like `B`, `β` not; Cyrillic `Б` and `б` like nothing and `6`), so ``lookalikeKey(_:)``
    /// alone would let `Борис` and `борис` be two accounts, and find neither from the other.
    /// Stores keep both keys unique: a name is taken when either of its keys is an account's, and
    /// ``AccountStore/account(named:)`` finds the account with the name's look-alike key, else
    /// the one with its capitals key. The name is decomposed before it is put in capitals: the
    /// capital of a precomposed `ῇ` puts its perispomeni on the eta, the capital of its
    /// title-case form `ῌ͂` on the iota (red team, ninth pass).
    public static func capitalsKey(_ name: String) -> String {
        lookalikeKey(nfd(name).uppercased())
    }

    // MARK: Internals

    /// RFC 8265 width mapping: full-width and half-width forms to their decompositions, and the
    /// ideographic space.
    static func widthMapped(_ s: Unicode.Scalar) -> [Unicode.Scalar] {
        if (0xFF01...0xFFEE).contains(s.value) { return Array(String(s).precomposedStringWithCompatibilityMapping.unicodeScalars) }
        if s.value == 0x3000 { return [" "] }
        return [s]
    }

    /// UTS #39 §5.4 on the decomposed name: no overlay mark (`o` + U+0338 draws `ø`), no mark
    /// twice on one letter, at most four marks on one letter (red team, eighth pass).
    static func checkMarks(_ name: String) throws(WebAuthnError) {
        var marks: [Unicode.Scalar] = []
        for scalar in nfd(name).unicodeScalars {
            let p = scalar.properties
            guard p.generalCategory == .nonspacingMark || p.generalCategory == .enclosingMark else {
                marks.removeAll(keepingCapacity: true)
                continue
            }
            guard p.canonicalCombiningClass.rawValue != 1 else { throw invalid("the name has the overlay mark U+\(hex(scalar))") }
            guard !marks.contains(scalar) else { throw invalid("the name has the mark U+\(hex(scalar)) twice on one letter") }
            marks.append(scalar)
            guard marks.count <= 4 else { throw invalid("the name has more than four marks on one letter") }
        }
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
