internal import CCBOR

/// Encodes a ``CBOR`` value in CTAP2 canonical form (shortest heads, definite
/// lengths, map keys sorted by their encoding), writing item heads with
/// libcbor's encoders. Used for test fixtures, the software authenticator and
/// `webauthn inspect`; verification never re-encodes what it checks.
package enum CBOREncoder {
    package static func encode(_ value: CBOR) -> [UInt8] {
        var out = [UInt8]()
        write(value, to: &out)
        return out
    }

    private static func head(_ out: inout [UInt8], _ body: (UnsafeMutablePointer<UInt8>, Int) -> Int) {
        var buffer = [UInt8](repeating: 0, count: 9)
        let n = buffer.withUnsafeMutableBufferPointer { body($0.baseAddress!, 9) }
        out.append(contentsOf: buffer[0..<n])
    }

    private static func write(_ value: CBOR, to out: inout [UInt8]) {
        switch value {
        case .unsigned(let u): head(&out) { cbor_encode_uint(u, $0, $1) }
        case .negative(let n): head(&out) { cbor_encode_negint(n, $0, $1) }
        case .bytes(let b):
            head(&out) { cbor_encode_bytestring_start(b.count, $0, $1) }
            out.append(contentsOf: b)
        case .text(let t):
            let utf8 = Array(t.utf8)
            head(&out) { cbor_encode_string_start(utf8.count, $0, $1) }
            out.append(contentsOf: utf8)
        case .array(let items):
            head(&out) { cbor_encode_array_start(items.count, $0, $1) }
            for item in items { write(item, to: &out) }
        case .map(let pairs):
            head(&out) { cbor_encode_map_start(pairs.count, $0, $1) }
            let encoded = pairs.map { (encode($0.key), encode($0.value)) }
                .sorted { a, b in a.0.count != b.0.count ? a.0.count < b.0.count : a.0.lexicographicallyPrecedes(b.0) }
            for (k, v) in encoded {
                out.append(contentsOf: k)
                out.append(contentsOf: v)
            }
        case .bool(let b): head(&out) { cbor_encode_bool(b, $0, $1) }
        case .null: head(&out) { cbor_encode_null($0, $1) }
        case .undefined: head(&out) { cbor_encode_undef($0, $1) }
        case .float(let d): head(&out) { cbor_encode_double(d, $0, $1) }
        }
    }
}
