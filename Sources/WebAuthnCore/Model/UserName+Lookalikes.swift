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
        // Red team, seventh pass: capitals of one script that look like a capital of another
        ("Ϝ", "f"), ("Ԍ", "g"), ("Տ", "s"), ("Օ", "o"), ("Ս", "u"), ("Π", "π"), ("П", "π"), ("Ѳ", "θ"), ("Ф", "φ"), ("Ʃ", "σ"),
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
            // Red team, seventh pass
            ("ǁ", "ll"), ("ꞌ", "'"), ("ˈ", "'"), ("ʹ", "'"), ("ː", ":"), ("ꟾ", "l"), ("ɜ", "3"), ("ǝ", "e"), ("ə", "e"), ("ɛ", "e"),
            ("ɣ", "y"), ("ʃ", "σ"), ("ɸ", "φ"), ("ϝ", "f"), ("ԍ", "g"), ("ѳ", "θ"), ("ф", "φ"), ("ㅡ", "-"), ("ㄧ", "-"), ("ㅣ", "l"),
            ("丨", "l"), ("二", "="), ("ノ", "/"), ("\u{1173}", "-"), ("\u{1175}", "l"),  // ㅡ and ㅣ as NFKD leaves them
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

    /// The script of a name's letter, digit or combining mark: one of the scripts recommended for
    /// identifiers (UAX #31, table 5), the CJK ones as one. A letter of any other script (Runic,
    /// Old Italic, Lisu, Cherokee, Coptic, Canadian Syllabics, ..., and mathematical letters) has
    /// none, and no name may hold it: those scripts held whole names that read as Latin ones (red
    /// team, seventh pass). A name's letters and digits come from one script; Latin may stand
    /// beside Han, kana, Hangul and Bopomofo (`tanaka太郎`).
    enum ScriptFamily: String {
        case latin = "Latin", greek = "Greek", cyrillic = "Cyrillic", armenian = "Armenian", hebrew = "Hebrew", arabic = "Arabic"
        case thaana = "Thaana", devanagari = "Devanagari", bengali = "Bengali", gurmukhi = "Gurmukhi", gujarati = "Gujarati", oriya = "Oriya"
        case tamil = "Tamil", telugu = "Telugu", kannada = "Kannada", malayalam = "Malayalam", sinhala = "Sinhala", thai = "Thai", lao = "Lao"
        case tibetan = "Tibetan", myanmar = "Myanmar", georgian = "Georgian", ethiopic = "Ethiopic", khmer = "Khmer"
        case cjk = "Han, kana, Hangul and Bopomofo"

        /// The recommended script of `s`, by block; nil for any other.
        init?(_ s: Unicode.Scalar) {
            switch s.value {
            case 0x41...0x5A, 0x61...0x7A, 0xC0...0x24F, 0x250...0x2FF, 0x1D00...0x1DBF, 0x1E00...0x1EFF, 0x2C60...0x2C7F, 0xA720...0xA7FF,
                0xAB30...0xAB6F, 0xFF21...0xFF3A, 0xFF41...0xFF5A:
                self = .latin
            case 0x370...0x3FF, 0x1F00...0x1FFF: self = .greek
            case 0x400...0x52F, 0x1C80...0x1C8F, 0x2DE0...0x2DFF, 0xA640...0xA69F: self = .cyrillic
            case 0x531...0x58F, 0xFB13...0xFB17: self = .armenian
            case 0x591...0x5FF, 0xFB1D...0xFB4F: self = .hebrew
            case 0x600...0x6FF, 0x750...0x77F, 0x8A0...0x8FF, 0xFB50...0xFDFF, 0xFE70...0xFEFF: self = .arabic
            case 0x780...0x7BF: self = .thaana
            case 0x900...0x97F, 0xA8E0...0xA8FF: self = .devanagari
            case 0x980...0x9FF: self = .bengali
            case 0xA00...0xA7F: self = .gurmukhi
            case 0xA80...0xAFF: self = .gujarati
            case 0xB00...0xB7F: self = .oriya
            case 0xB80...0xBFF: self = .tamil
            case 0xC00...0xC7F: self = .telugu
            case 0xC80...0xCFF: self = .kannada
            case 0xD00...0xD7F: self = .malayalam
            case 0xD80...0xDFF: self = .sinhala
            case 0xE00...0xE7F: self = .thai
            case 0xE80...0xEFF: self = .lao
            case 0xF00...0xFFF: self = .tibetan
            case 0x1000...0x109F, 0xA9E0...0xA9FF, 0xAA60...0xAA7F: self = .myanmar
            case 0x10A0...0x10FF, 0x1C90...0x1CBF, 0x2D00...0x2D2F: self = .georgian
            case 0x1200...0x139F, 0x2D80...0x2DDF, 0xAB00...0xAB2F: self = .ethiopic
            case 0x1780...0x17FF, 0x19E0...0x19FF: self = .khmer
            case 0x1100...0x11FF, 0x2E80...0x2FDF, 0x3005...0x3007, 0x3021...0x3029, 0x3031...0x3035, 0x3038...0x303C, 0x3040...0x30FF,
                0x3100...0x312F, 0x3130...0x318F, 0x31A0...0x31BF, 0x31F0...0x31FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA960...0xA97F,
                0xAC00...0xD7FF, 0xF900...0xFAFF, 0xFF66...0xFFDC, 0x20000...0x3FFFF:
                self = .cjk
            default:
                return nil
            }
        }

        /// Combining marks of no one script (the combining diacritics): they may follow a letter of any.
        static func isInherited(_ s: Unicode.Scalar) -> Bool {
            switch s.value {
            case 0x300...0x36F, 0x1AB0...0x1AFF, 0x1DC0...0x1DFF, 0x20D0...0x20FF, 0xFE20...0xFE2F: true
            default: false
            }
        }

        /// Whether letters of these scripts may form one name: one script, or Latin with Han, kana and Hangul.
        static func mayMix(_ families: Set<ScriptFamily>) -> Bool {
            families.count <= 1 || families == [.latin, .cjk]
        }
    }
}
