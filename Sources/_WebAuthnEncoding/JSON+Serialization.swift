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
            } else if abs(n) <= 9_007_199_254_740_992, let i = Int64(exactly: n) {
                // Every integer a double holds exactly (to 2^53) in integer syntax: past 10^15
                // they were written as `9007199254740991.0`, which strict integer readers refuse.
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
    /// DEL, the C1 controls and the invisible characters (``escapedScalar(_:at:)``: format
    /// characters, default-ignorable code points, line separators) are written as `\u`
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
                    // Past the Basic Multilingual Plane (the tag characters, say): a surrogate pair.
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
    /// not) and its scalar value. Beyond ASCII: the C1 controls, every format character
    /// (Unicode's `Cf`: soft hyphen, zero-width characters and joiners, directional marks and
    /// controls, invisible operators, byte order mark, tags, ...), every default-ignorable code
    /// point (the fillers and variation selectors that show as nothing), and the line and
    /// paragraph separators. A fixed list had let the rarer ones through raw (red team,
    /// sixteenth pass: U+180E, U+1BCA0, U+034F, the Hangul fillers). ASCII, the common case,
    /// needs one comparison or two; other scalars, one property look-up each.
    @inline(__always)
    private static func escapedScalar(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> (Int, UInt32) {
        let b = bytes[index]
        if b < 0x20 || b == 0x22 || b == 0x5C || b == 0x7F { return (1, UInt32(b)) }
        guard b >= 0xC2 else { return (0, 0) }
        // `bytes` is a String's UTF-8, so the sequence is well-formed and complete.
        let length = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4
        guard index + length <= bytes.count else { return (0, 0) }
        var value = UInt32(b) & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07)
        for offset in 1..<length { value = value << 6 | UInt32(bytes[index + offset] & 0x3F) }
        return Unicode.Scalar(value)?.isHiddenOrControl == true ? (length, value) : (0, 0)
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
