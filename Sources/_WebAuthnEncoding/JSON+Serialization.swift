// Compact JSON output of the engine's JSONValue: members in order, integers without a fraction.
extension JSONValue {
    /// Serialises compactly, in member order. Integers print without a fraction.
    package func serialized() -> String {
        var out = [UInt8]()
        out.reserveCapacity(256)
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Serialises to UTF-8 bytes.
    package func serializedBytes() -> [UInt8] {
        var out = [UInt8]()
        write(to: &out)
        return out
    }

    package func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n):
            if !n.isFinite {
                // JSON has no NaN or infinity (`nan` and `inf` are not JSON): null, as JSON.stringify writes them.
                out.append(contentsOf: "null".utf8)
            } else if abs(n) < 9.0e15, let i = Int64(exactly: n) {
                out.append(contentsOf: String(i).utf8)
            } else {
                out.append(contentsOf: "\(n)".utf8)
            }
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (i, m) in object.members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(m.key, to: &out)
                out.append(UInt8(ascii: ":"))
                m.value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Writes `s` as a JSON string. Beside what JSON requires (quote, backslash, C0 controls),
    /// DEL, the C1 controls and the invisible format characters (``escapedScalar(_:at:)``:
    /// bidirectional controls, zero-width characters, line separators, tags) are written as `\u`
    /// escapes: the output is read in terminals and logs, where a C1 CSI or a
    /// right-to-left override quoted from a stranger's input (an origin, a certificate's name)
    /// reorders or rewrites what is shown (red team, sixteenth pass: an origin with U+202E read as
    /// `https://example.org`). A parser reads the same string either way.
    package static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            // Runs of bytes that need no escape are copied whole.
            var start = 0
            var index = 0
            while index < bytes.count {
                let b = bytes[index]
                let (length, scalar) = escapedScalar(bytes, at: index)
                guard length > 0 else {
                    index += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                index += length
                start = index
                switch b {
                case 0x22: out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                default:
                    // Past the Basic Multilingual Plane (the tag characters): a surrogate pair.
                    let units = scalar > 0xFFFF ? [0xD800 + ((scalar - 0x10000) >> 10), 0xDC00 + ((scalar - 0x10000) & 0x3FF)] : [scalar]
                    for unit in units {
                        out.append(contentsOf: [0x5C, UInt8(ascii: "u")])
                        for shift in stride(from: 12, through: 0, by: -4) { out.append(hexDigit(UInt8((unit >> UInt32(shift)) & 0xf))) }
                    }
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether the UTF-8 sequence at `index` is written escaped: its length in bytes (0: it is
    /// not) and its scalar value. Beyond ASCII: the C1 controls, and the invisible format
    /// characters used to disguise text (soft hyphen, zero-width characters and joiners,
    /// directional marks and controls, line and paragraph separators, word joiner and invisible
    /// operators, byte order mark, interlinear annotation characters, tag characters).
    @inline(__always)
    private static func escapedScalar(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> (Int, UInt32) {
        let b = bytes[index]
        if b < 0x20 || b == 0x22 || b == 0x5C || b == 0x7F { return (1, UInt32(b)) }
        guard b >= 0xC2 else { return (0, 0) }
        func next(_ offset: Int) -> UInt32 { index + offset < bytes.count ? UInt32(bytes[index + offset]) : 0 }
        switch b {
        case 0xC2:
            let n1 = next(1)
            return (0x80...0x9F).contains(n1) || n1 == 0xAD ? (2, n1) : (0, 0)  // C1 controls, soft hyphen
        case 0xD8:
            return next(1) == 0x9C ? (2, 0x061C) : (0, 0)  // Arabic letter mark
        case 0xE2, 0xEF:
            let scalar = UInt32(b & 0x0F) << 12 | (next(1) & 0x3F) << 6 | (next(2) & 0x3F)
            switch scalar {
            case 0x200B...0x200F, 0x2028...0x202E, 0x2060...0x2064, 0x2066...0x206F, 0xFEFF, 0xFFF9...0xFFFB: return (3, scalar)
            default: return (0, 0)
            }
        case 0xF3:
            // U+E0000 to U+E007F, the tag characters: F3 A0 80 80 to F3 A0 81 BF.
            guard next(1) == 0xA0, next(2) == 0x80 || next(2) == 0x81 else { return (0, 0) }
            return (4, 0xE0000 | (next(2) & 0x3F) << 6 | (next(3) & 0x3F))
        default: return (0, 0)
        }
    }

    /// The lowercase hexadecimal digit of `nibble` (0 to 15).
    private static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    package init(stringLiteral value: String) { self = .string(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    package init(integerLiteral value: Int) { self = .number(Double(value)) }
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    package init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
    package init(nilLiteral: ()) { self = .null }
}
