// The tables behind `UserName`: which scripts a name may mix, and the look-alike key's tables
// (parsed from `UserName+Skeleton.swift`). Changing a table changes account keys: the stores
// recompute the keys of existing accounts in a migration (SQLite 11, PostgreSQL 13), which must
// then be run again.
extension UserName {
    /// The look-alike key's two tables, parsed once from the generated data.
    struct SkeletonTables: Sendable {
        /// Capitals folded before lowercasing.
        let capitals: [UInt32: [Unicode.Scalar]]
        /// Each scalar's image in a lowercased, decomposed name.
        let images: [UInt32: [Unicode.Scalar]]

        static let shared = SkeletonTables(capitals: parse(UserName.capitalData), images: parse(UserName.skeletonData))

        /// `hex=hex,hex;...` as a table. The data is generated and checked by the tests: an entry
        /// that does not parse is a build defect, and stops the process at first use.
        static func parse(_ data: String) -> [UInt32: [Unicode.Scalar]] {
            var table: [UInt32: [Unicode.Scalar]] = [:]
            for entry in data.split(separator: ";") {
                let parts = entry.split(separator: "=")
                guard parts.count == 2, let key = UInt32(parts[0], radix: 16) else { preconditionFailure("skeleton data: \(entry)") }
                table[key] = parts[1].split(separator: ",").map { hex in
                    guard let value = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(value) else { preconditionFailure("skeleton data: \(entry)") }
                    return scalar
                }
            }
            return table
        }
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
