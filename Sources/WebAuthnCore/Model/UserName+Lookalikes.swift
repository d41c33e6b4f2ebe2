// The tables behind `UserName`: which scripts a name may mix, and which letters look like
// Latin ones. Changing a table changes account keys: the stores recompute the keys of existing
// accounts in a migration (SQLite 10, PostgreSQL 11), which must then be run again.
extension UserName {
    /// Capitals that render like a Latin capital, folded to that letter (lowercase) before the
    /// name is lowercased: Greek `Η` looks like `H`, while its lowercase `η` looks like `n`. Also
    /// the lunate sigma, which NFKC would make a final sigma.
    static let capitalLookalikes: [UInt32: String] = table([
        // Greek
        ("Α", "a"), ("Β", "b"), ("Ε", "e"), ("Ζ", "z"), ("Η", "h"), ("Ι", "i"), ("Κ", "k"), ("Μ", "m"), ("Ν", "n"), ("Ο", "o"),
        ("Ρ", "p"), ("Τ", "t"), ("Υ", "y"), ("Χ", "x"), ("ϒ", "y"), ("ϲ", "c"), ("Ϲ", "c"),
        // Cyrillic
        ("А", "a"), ("В", "b"), ("Е", "e"), ("Ѕ", "s"), ("І", "i"), ("Ј", "j"), ("К", "k"), ("М", "m"), ("Н", "h"), ("О", "o"),
        ("Р", "p"), ("С", "c"), ("Т", "t"), ("У", "y"), ("Х", "x"), ("Ү", "y"), ("Һ", "h"), ("Ӏ", "l"), ("Ԛ", "q"), ("Ԝ", "w"),
        ("Ԁ", "d"),
        // Coptic
        ("Ⲁ", "a"), ("Ⲃ", "b"), ("Ⲉ", "e"), ("Ⲍ", "z"), ("Ⲏ", "h"), ("Ⲓ", "i"), ("Ⲕ", "k"), ("Ⲙ", "m"), ("Ⲛ", "n"), ("Ⲟ", "o"),
        ("Ⲣ", "p"), ("Ⲥ", "c"), ("Ⲧ", "t"), ("Ⲩ", "y"), ("Ⲭ", "x"),
    ])

    /// Letters (after lowercasing and decomposition) that render like Latin letters, and those
    /// letters; a few characters that render like ASCII punctuation, and ligatures spelt out.
    static let latinLookalikes: [UInt32: String] = table(
        [
            // Cyrillic
            ("а", "a"), ("в", "b"), ("с", "c"), ("ԁ", "d"), ("е", "e"), ("һ", "h"), ("і", "i"), ("ј", "j"), ("к", "k"), ("ӏ", "l"),
            ("м", "m"), ("н", "h"), ("о", "o"), ("п", "n"), ("р", "p"), ("ԛ", "q"), ("ѕ", "s"), ("т", "t"), ("џ", "u"), ("ѵ", "v"),
            ("ԝ", "w"), ("х", "x"), ("у", "y"), ("ү", "y"), ("з", "3"),
            // Greek (the final sigma is a sigma: `ΟΔΟΣ` lowercased and `οδος` are one name)
            ("α", "a"), ("β", "b"), ("ε", "e"), ("η", "n"), ("ι", "i"), ("κ", "k"), ("ν", "v"), ("ο", "o"), ("ρ", "p"), ("υ", "u"),
            ("χ", "x"), ("γ", "y"), ("ω", "w"), ("ζ", "z"), ("μ", "m"), ("τ", "t"), ("ϳ", "j"), ("ς", "σ"),
            // Armenian
            ("օ", "o"), ("ս", "u"), ("ց", "g"), ("հ", "h"), ("ո", "n"), ("զ", "q"),
            // Coptic
            ("ⲁ", "a"), ("ⲉ", "e"), ("ⲓ", "i"), ("ⲕ", "k"), ("ⲟ", "o"), ("ⲣ", "p"), ("ⲥ", "c"), ("ⲧ", "t"), ("ⲭ", "x"),
            // Latin small capitals, phonetic letters, clicks, ligatures
            ("ᴀ", "a"), ("ʙ", "b"), ("ᴄ", "c"), ("ᴅ", "d"), ("ᴇ", "e"), ("ꜰ", "f"), ("ɢ", "g"), ("ʜ", "h"), ("ɪ", "i"), ("ᴊ", "j"),
            ("ᴋ", "k"), ("ʟ", "l"), ("ᴍ", "m"), ("ɴ", "n"), ("ᴏ", "o"), ("ᴘ", "p"), ("ʀ", "r"), ("ꜱ", "s"), ("ᴛ", "t"), ("ᴜ", "u"),
            ("ᴠ", "v"), ("ᴡ", "w"), ("ʏ", "y"), ("ᴢ", "z"), ("ı", "i"), ("ȷ", "j"), ("ɑ", "a"), ("ɡ", "g"), ("ɩ", "i"), ("ʋ", "u"),
            ("ᴑ", "o"), ("ǀ", "l"), ("ǃ", "!"), ("ʼ", "'"), ("ꝏ", "oo"), ("ʣ", "dz"), ("ß", "ss"),
            // Lisu (red team, fifth pass: `ꓮlice1` beside `alice1`)
            ("ꓮ", "a"), ("ꓐ", "b"), ("ꓚ", "c"), ("ꓓ", "d"), ("ꓰ", "e"), ("ꓝ", "f"), ("ꓖ", "g"), ("ꓧ", "h"), ("ꓲ", "i"), ("ꓙ", "j"),
            ("ꓗ", "k"), ("ꓡ", "l"), ("ꓟ", "m"), ("ꓠ", "n"), ("ꓳ", "o"), ("ꓑ", "p"), ("ꓣ", "r"), ("ꓢ", "s"), ("ꓔ", "t"), ("ꓴ", "u"),
            ("ꓦ", "v"), ("ꓪ", "w"), ("ꓫ", "x"), ("ꓬ", "y"), ("ꓜ", "z"),
            // Cherokee capitals (keyed by their lowercase forms, as names are lowercased first)
            ("Ꭺ", "a"), ("Ᏼ", "b"), ("Ꮟ", "b"), ("Ꮯ", "c"), ("Ꭰ", "d"), ("Ꭼ", "e"), ("Ꮐ", "g"), ("Ꮋ", "h"), ("Ꮒ", "h"), ("Ꭵ", "i"),
            ("Ꭻ", "j"), ("Ꮶ", "k"), ("Ꮮ", "l"), ("Ꮇ", "m"), ("Ꮲ", "p"), ("Ꭱ", "r"), ("Ꮪ", "s"), ("Ꭲ", "t"), ("Ꮩ", "v"), ("Ꮃ", "w"),
            ("Ꭹ", "y"), ("Ꮓ", "z"),
            // Canadian Syllabics
            ("ᗩ", "a"), ("ᗷ", "b"), ("ᑕ", "c"), ("ᗪ", "d"), ("ᕼ", "h"), ("ᒍ", "j"), ("ᒪ", "l"), ("ᗰ", "m"), ("ᑎ", "n"), ("ᗝ", "o"),
            ("ᑭ", "p"), ("ᖇ", "r"), ("ᔕ", "s"), ("ᑌ", "u"), ("ᐯ", "v"), ("ᗯ", "w"), ("᙭", "x"), ("ᘔ", "z"),
            // Marks of length and the ideograph one, which render as a dash beside Latin letters
            ("ー", "-"), ("一", "-"),
        ], lowercased: true)

    /// The table of `pairs`, keyed by each one's first scalar (after lowercasing, when asked).
    static func table(_ pairs: [(String, String)], lowercased: Bool = false) -> [UInt32: String] {
        var table: [UInt32: String] = [:]
        for (from, to) in pairs {
            guard let f = (lowercased ? from.lowercased() : from).unicodeScalars.first else { continue }
            table[f.value] = to
        }
        return table
    }

    /// The families of scripts a name may not mix. Letters of each of the first eight look like
    /// Latin letters; `cjk` (Han, kana, Hangul, Bopomofo) may stand beside Latin, as in
    /// `tanaka太郎`; `other` is every other script's letter and every digit other than 0–9, which
    /// may not stand beside any of them (`aᛁice` is Runic beside Latin, `b୦b` an Oriya zero).
    enum ScriptFamily: String {
        case latin = "Latin", greek = "Greek", cyrillic = "Cyrillic", armenian = "Armenian", lisu = "Lisu", cherokee = "Cherokee"
        case canadianSyllabics = "Canadian Syllabics", coptic = "Coptic", cjk = "Han, kana and Hangul", other = "other scripts"

        /// The family of a letter.
        init(letter s: Unicode.Scalar) {
            switch s.value {
            case 0x41...0x5A, 0x61...0x7A, 0xC0...0x24F, 0x250...0x2FF, 0x1D00...0x1DBF, 0x1E00...0x1EFF, 0x2C60...0x2C7F, 0xA720...0xA7FF,
                0xAB30...0xAB6F, 0xFF21...0xFF3A, 0xFF41...0xFF5A:
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
            case 0x1100...0x11FF, 0x2E80...0x2FDF, 0x3005...0x3007, 0x3021...0x3029, 0x3031...0x3035, 0x3038...0x303C, 0x3040...0x30FF,
                0x3100...0x312F, 0x3130...0x318F, 0x31A0...0x31BF, 0x31F0...0x31FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA960...0xA97F,
                0xAC00...0xD7FF, 0xF900...0xFAFF, 0xFF66...0xFFDC, 0x20000...0x3FFFF:
                self = .cjk
            default:
                self = .other
            }
        }

        /// Whether letters of these families may form one name: one family, or Latin with Han,
        /// kana and Hangul.
        static func mayMix(_ families: Set<ScriptFamily>) -> Bool {
            families.count <= 1 || families == [.latin, .cjk]
        }
    }
}
