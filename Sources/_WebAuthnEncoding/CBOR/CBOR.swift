/// An immutable CBOR value decoded from untrusted bytes.
///
/// Only the subset CTAP2 allows is representable: no tags, no indefinite
/// lengths. Maps keep their encoded order and never hold duplicate keys.
package indirect enum CBOR: Sendable, Hashable {
    case unsigned(UInt64)
    /// A negative integer, stored as in CBOR: the value is `-1 - n`.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    case map([CBORPair])
    case bool(Bool)
    case null
    case undefined
    case float(Double)

    /// The value as a signed integer, if it is an integer that fits `Int`.
    package var intValue: Int? {
        switch self {
        case .unsigned(let u): return u <= UInt64(Int.max) ? Int(u) : nil
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }
    package var bytesValue: [UInt8]? { if case .bytes(let b) = self { return b } else { return nil } }
    package var textValue: String? { if case .text(let t) = self { return t } else { return nil } }
    package var arrayValue: [CBOR]? { if case .array(let a) = self { return a } else { return nil } }
    package var mapValue: [CBORPair]? { if case .map(let m) = self { return m } else { return nil } }

    /// Looks up a map member by key.
    package subscript(key: CBOR) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        for p in pairs where p.key == key { return p.value }
        return nil
    }
    /// Looks up a map member by text key, compared as UTF-8 bytes (not by
    /// Unicode canonical equivalence, as `String ==` would).
    package subscript(key: String) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        for p in pairs {
            if case .text(let t) = p.key, Bytes.sameUTF8(t, key) { return p.value }
        }
        return nil
    }
    package subscript(key: Int) -> CBOR? { self[CBOR(key)] }

    /// An integer in exact decimal (`-18446744073709551616` to `18446744073709551615`); nil for
    /// any other item.
    package var integerText: String? {
        switch self {
        case .unsigned(let n): String(n)
        case .negative(let n): n == .max ? "-18446744073709551616" : "-" + String(n + 1)
        default: nil
        }
    }

    /// A map key as a message names it: text quoted (its first 64 characters), an integer in
    /// decimal, any other item by its kind; never Swift's debugging text (`unsigned(1)`).
    package var keyDescription: String {
        if let text = textValue { return "\"" + text.prefix(64) + (text.count > 64 ? "…\"" : "\"") }
        if let integer = integerText { return integer }
        switch self {
        case .bytes: return "a byte string"
        case .array: return "an array"
        case .map: return "a map"
        case .bool(let b): return b ? "true" : "false"
        case .float: return "a float"
        default: return "null or undefined"
        }
    }

    /// The item in CBOR diagnostic notation (RFC 8949 §8): integers in decimal, byte strings as
    /// `h'…'`, text quoted as in JSON, floats with a point or an exponent (`1.0`, `NaN`,
    /// `-Infinity`), `null` and `undefined`. Two different items never read alike (in JSON,
    /// `[1]` and `[1.0]`, `h'00'` and `"AA"`, `null` and `undefined` do). Linear in the item's size.
    package var diagnosticNotation: String {
        var out = ""
        writeDiagnostic(to: &out)
        return out
    }

    private func writeDiagnostic(to out: inout String) {
        switch self {
        case .unsigned, .negative: out += integerText ?? ""
        case .bytes(let b): out += "h'" + Bytes.hex(b) + "'"
        case .text(let t): out += JSONValue.string(t).serialized()
        case .array(let items):
            out += "["
            for (i, x) in items.enumerated() {
                if i > 0 { out += ", " }
                x.writeDiagnostic(to: &out)
            }
            out += "]"
        case .map(let pairs):
            out += "{"
            for (i, pair) in pairs.enumerated() {
                if i > 0 { out += ", " }
                pair.key.writeDiagnostic(to: &out)
                out += ": "
                pair.value.writeDiagnostic(to: &out)
            }
            out += "}"
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        case .undefined: out += "undefined"
        case .float(let d): out += d.isNaN ? "NaN" : d.isInfinite ? (d > 0 ? "Infinity" : "-Infinity") : d.description
        }
    }

    /// Whether the item is a NaN or holds one at any depth (in an array, or a map's keys or
    /// values): such an item equals nothing, itself included.
    package var holdsNaN: Bool {
        switch self {
        case .float(let d): d.isNaN
        case .array(let items): items.contains { $0.holdsNaN }
        case .map(let pairs): pairs.contains { $0.key.holdsNaN || $0.value.holdsNaN }
        default: false
        }
    }

    /// An integer value.
    package init(_ int: Int) { self = int >= 0 ? .unsigned(UInt64(int)) : .negative(UInt64(-1 - int)) }
}

/// A key and value of a CBOR map.
package struct CBORPair: Sendable, Hashable {
    package let key: CBOR
    package let value: CBOR
    package init(_ key: CBOR, _ value: CBOR) {
        self.key = key
        self.value = value
    }
}

/// Bounds applied while decoding untrusted CBOR.
package struct CBORLimits: Sendable {
    /// Maximum nesting depth of arrays and maps.
    package var maxDepth: Int
    /// Maximum number of data items in one document.
    package var maxItems: Int
    /// Maximum size of the encoded document.
    package var maxBytes: Int

    package init(maxDepth: Int = 16, maxItems: Int = 4096, maxBytes: Int = 256 * 1024) {
        self.maxDepth = maxDepth
        self.maxItems = maxItems
        self.maxBytes = maxBytes
    }
}
