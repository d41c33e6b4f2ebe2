/// A JSON value, as parsed by the engine's strict, bounded parser.
///
/// The engine parses client JSON itself rather than through `JSONDecoder`:
/// it must bound depth and size, reject duplicate member names (two `origin`
/// members are an attack on parser differences), and it sits on the hot path
/// of every ceremony.
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    package var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    package var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    package var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }
    package var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    package var numberValue: Double? { if case .number(let n) = self { return n } else { return nil } }
    /// The number as an integer, if it is one exactly.
    package var intValue: Int? {
        guard case .number(let n) = self, abs(n) < 9.0e15, let i = Int(exactly: n) else { return nil }
        return i
    }
    package var isNull: Bool { if case .null = self { return true } else { return false } }

    package subscript(key: String) -> JSONValue? { objectValue?[key] }
}

/// A JSON object that keeps its members' order (for stable output).
package struct JSONObject: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    package private(set) var members: [(key: String, value: JSONValue)]

    package init(_ members: [(String, JSONValue)] = []) { self.members = members.map { (key: $0.0, value: $0.1) } }
    package init(dictionaryLiteral elements: (String, JSONValue)...) { self.init(elements) }

    /// The member whose name is exactly `key`, compared as UTF-8 bytes (never
    /// by Unicode canonical equivalence, under which U+212A KELVIN SIGN is `K`).
    package subscript(key: String) -> JSONValue? {
        get {
            for m in members where Bytes.sameUTF8(m.key, key) { return m.value }
            return nil
        }
        set {
            if let i = members.firstIndex(where: { Bytes.sameUTF8($0.key, key) }) {
                if let newValue { members[i].value = newValue } else { members.remove(at: i) }
            } else if let newValue {
                members.append((key: key, value: newValue))
            }
        }
    }

    package var keys: [String] { members.map(\.key) }

    /// Equal when both have the same members, in any order (JSON objects are unordered).
    package static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.members.count == rhs.members.count && lhs.members.allSatisfy { rhs[$0.key] == $0.value }
    }
}

/// Limits for parsing untrusted JSON.
package struct JSONLimits: Sendable {
    /// The default size limit of a request body: 64 KiB. A WebAuthn response is
    /// a few KiB (a TPM or SafetyNet attestation with its certificates about
    /// 10 KiB); the limit leaves room for eight-certificate chains.
    package static let defaultMaxBytes = 64 * 1024

    package var maxBytes: Int
    package var maxDepth: Int
    package init(maxBytes: Int = JSONLimits.defaultMaxBytes, maxDepth: Int = 32) {
        self.maxBytes = maxBytes
        self.maxDepth = maxDepth
    }
}

extension JSONValue {
    /// Parses UTF-8 JSON text. Throws `json_malformed` or `input_too_large`.
    package static func parse(_ bytes: [UInt8], limits: JSONLimits = JSONLimits()) throws(WebAuthnError) -> JSONValue {
        guard bytes.count <= limits.maxBytes else {
            throw WebAuthnError(.inputTooLarge, "JSON input is \(bytes.count) bytes; the limit is \(limits.maxBytes)")
        }
        return try bytes.withUnsafeBufferPointer { buf throws(WebAuthnError) -> JSONValue in
            var parser = JSONParser(input: buf, maxDepth: limits.maxDepth)
            return try parser.parseDocument()
        }
    }

    /// Parses JSON text given as a string.
    package static func parse(_ text: String, limits: JSONLimits = JSONLimits()) throws(WebAuthnError) -> JSONValue {
        try parse(Array(text.utf8), limits: limits)
    }
}

package struct JSONParser {
    package let input: UnsafeBufferPointer<UInt8>
    package let maxDepth: Int
    package var pos = 0
    package var depth = 0

    package init(input: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.input = input
        self.maxDepth = maxDepth
    }

    package func fail(_ what: String) -> WebAuthnError {
        WebAuthnError(.jsonMalformed, "invalid JSON at byte \(pos): \(what)")
    }

    package mutating func parseDocument() throws(WebAuthnError) -> JSONValue {
        // A UTF-8 byte order mark is stripped (WebAuthn L3 §7.1 step 5 note).
        if input.count >= 3, input[0] == 0xEF, input[1] == 0xBB, input[2] == 0xBF { pos = 3 }
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard pos == input.count else { throw fail("trailing characters after the JSON value") }
        return value
    }

    @inline(__always) package mutating func skipWhitespace() {
        while pos < input.count {
            let c = input[pos]
            if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { pos += 1 } else { break }
        }
    }

    package mutating func parseValue() throws(WebAuthnError) -> JSONValue {
        guard pos < input.count else { throw fail("unexpected end of input") }
        switch input[pos] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    package mutating func expectLiteral(_ literal: StaticString) throws(WebAuthnError) {
        let n = literal.utf8CodeUnitCount
        guard pos + n <= input.count else { throw fail("truncated literal") }
        let p = literal.utf8Start
        for i in 0..<n where input[pos + i] != p[i] { throw fail("invalid literal") }
        pos += n
    }

    package mutating func enter() throws(WebAuthnError) {
        depth += 1
        guard depth <= maxDepth else {
            throw WebAuthnError(.jsonMalformed, "JSON nesting deeper than \(maxDepth) levels")
        }
    }

    package mutating func parseObject() throws(WebAuthnError) -> JSONValue {
        try enter()
        pos += 1
        var members: [(String, JSONValue)] = []
        members.reserveCapacity(8)
        var seen: Set<String>?
        skipWhitespace()
        if pos < input.count, input[pos] == UInt8(ascii: "}") {
            pos += 1; depth -= 1
            return .object(JSONObject(members))
        }
        while true {
            skipWhitespace()
            guard pos < input.count, input[pos] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
            let key = try parseString()
            try checkNewMemberName(key, members: members, seen: &seen)
            skipWhitespace()
            guard pos < input.count, input[pos] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            pos += 1
            skipWhitespace()
            let value = try parseValue()
            members.append((key, value))
            skipWhitespace()
            guard pos < input.count else { throw fail("unterminated object") }
            if input[pos] == UInt8(ascii: ",") { pos += 1; continue }
            if input[pos] == UInt8(ascii: "}") { pos += 1; break }
            throw fail("expected ',' or '}'")
        }
        depth -= 1
        return .object(JSONObject(members))
    }

    /// Members of an object scanned one by one before a set of their names is
    /// built: WebAuthn objects have fewer, and the scan is faster than hashing.
    package static let memberScanLimit = 16

    /// Refuses a member name already used in the same object (a parser
    /// differential on `origin` or `type`). Names that are equal or canonically
    /// equivalent count as duplicates, which is stricter than a byte comparison.
    /// Small objects are scanned; from ``memberScanLimit`` members on, `seen`
    /// holds every name, so the check stays linear in the size of the object.
    package func checkNewMemberName(_ key: String, members: [(String, JSONValue)], seen: inout Set<String>?) throws(WebAuthnError) {
        if let inserted = seen?.insert(key).inserted {  // mutates the set in place
            guard inserted else { throw fail("duplicate member name \"\(key.prefix(64))\"") }
            return
        }
        for m in members where m.0 == key { throw fail("duplicate member name \"\(key.prefix(64))\"") }
        guard members.count + 1 >= Self.memberScanLimit else { return }
        var names = Set<String>(minimumCapacity: 2 * Self.memberScanLimit)
        for m in members { names.insert(m.0) }
        names.insert(key)
        seen = names
    }

    package mutating func parseArray() throws(WebAuthnError) -> JSONValue {
        try enter()
        pos += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if pos < input.count, input[pos] == UInt8(ascii: "]") {
            pos += 1; depth -= 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            guard pos < input.count else { throw fail("unterminated array") }
            if input[pos] == UInt8(ascii: ",") { pos += 1; continue }
            if input[pos] == UInt8(ascii: "]") { pos += 1; break }
            throw fail("expected ',' or ']'")
        }
        depth -= 1
        return .array(items)
    }

    /// The most combining marks (non-starters) in a row: UAX #15's
    /// Stream-Safe Text Format. Swift compares, hashes and normalises strings
    /// by canonical equivalence, whose cost grows with the square of such a
    /// run; no real text has more than a handful, so longer runs are refused
    /// before any string operation sees them.
    package static let maxNonStarters = 30

    package func checkStreamSafe(_ s: String) throws(WebAuthnError) {
        var run = 0
        for scalar in s.unicodeScalars {
            if scalar.properties.canonicalCombiningClass.rawValue != 0 {
                run += 1
                if run > Self.maxNonStarters { throw fail("a string has more than \(Self.maxNonStarters) combining marks in a row") }
            } else {
                run = 0
            }
        }
    }

    package mutating func parseString() throws(WebAuthnError) -> String {
        pos += 1  // opening quote
        let start = pos
        // Fast path: no escapes. ASCII needs no UTF-8 validation.
        var ascii = true
        while pos < input.count {
            let c = input[pos]
            if c == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: input[start..<pos])
                pos += 1
                if ascii {
                    return String(unsafeUninitializedCapacity: slice.count) { buffer in
                        _ = buffer.initialize(from: slice)
                        return slice.count
                    }
                }
                guard let s = String(validating: slice, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
                try checkStreamSafe(s)
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw fail("control character in string") }
            ascii = ascii && c < 0x80
            pos += 1
        }
        var bytes = Array(UnsafeBufferPointer(rebasing: input[start..<pos]))
        while pos < input.count {
            let c = input[pos]
            if c == UInt8(ascii: "\"") {
                pos += 1
                guard let s = String(validating: bytes, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
                try checkStreamSafe(s)
                return s
            }
            if c < 0x20 { throw fail("control character in string") }
            if c != UInt8(ascii: "\\") { bytes.append(c); pos += 1; continue }
            pos += 1
            guard pos < input.count else { break }
            let e = input[pos]
            pos += 1
            switch e {
            case UInt8(ascii: "\""): bytes.append(0x22)
            case UInt8(ascii: "\\"): bytes.append(0x5C)
            case UInt8(ascii: "/"): bytes.append(0x2F)
            case UInt8(ascii: "b"): bytes.append(0x08)
            case UInt8(ascii: "f"): bytes.append(0x0C)
            case UInt8(ascii: "n"): bytes.append(0x0A)
            case UInt8(ascii: "r"): bytes.append(0x0D)
            case UInt8(ascii: "t"): bytes.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard pos + 1 < input.count, input[pos] == UInt8(ascii: "\\"), input[pos + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate")
                    }
                    pos += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid surrogate pair") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw fail("unpaired surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("invalid unicode escape") }
                UTF8.encode(u) { bytes.append($0) }
            default:
                throw fail("invalid escape")
            }
        }
        throw fail("unterminated string")
    }

    /// Whether `c` continues a number after its integer part (fraction, exponent, or a digit after a leading 0).
    @inline(__always) package static func continuesNumber(_ c: UInt8) -> Bool {
        c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") || (0x30...0x39).contains(c)
    }

    package mutating func parseHex4() throws(WebAuthnError) -> UInt32 {
        guard pos + 4 <= input.count else { throw fail("truncated unicode escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = input[pos]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            default: throw fail("invalid unicode escape")
            }
            v = v << 4 | d
            pos += 1
        }
        return v
    }

    package mutating func parseNumber() throws(WebAuthnError) -> JSONValue {
        let start = pos
        let negative = input[pos] == UInt8(ascii: "-")
        if negative { pos += 1 }
        guard pos < input.count else { throw fail("truncated number") }
        let integerStart = pos
        var integer: Int64 = 0
        if input[pos] == UInt8(ascii: "0") {
            pos += 1
        } else if (0x31...0x39).contains(input[pos]) {
            while pos < input.count, (0x30...0x39).contains(input[pos]) {
                if pos - integerStart < 15 { integer = integer &* 10 &+ Int64(input[pos] &- 0x30) }  // at most 15 digits: < 2^53
                pos += 1
            }
        } else {
            throw fail("invalid number")
        }
        // Fast path: an integer of at most 15 digits is exact as a Double.
        if pos - integerStart <= 15, pos == input.count || !Self.continuesNumber(input[pos]) {
            let value = Double(integer)
            return .number(negative ? -value : value)
        }
        if pos < input.count, input[pos] == UInt8(ascii: ".") {
            pos += 1
            let digits = pos
            while pos < input.count, (0x30...0x39).contains(input[pos]) { pos += 1 }
            guard pos > digits else { throw fail("invalid fraction") }
        }
        if pos < input.count, input[pos] == UInt8(ascii: "e") || input[pos] == UInt8(ascii: "E") {
            pos += 1
            if pos < input.count, input[pos] == UInt8(ascii: "+") || input[pos] == UInt8(ascii: "-") { pos += 1 }
            let digits = pos
            while pos < input.count, (0x30...0x39).contains(input[pos]) { pos += 1 }
            guard pos > digits else { throw fail("invalid exponent") }
        }
        guard pos - start <= 40 else { throw fail("number too long") }
        let text = String(decoding: UnsafeBufferPointer(rebasing: input[start..<pos]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw fail("number out of range") }
        return .number(value)
    }
}
