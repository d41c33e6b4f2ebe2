internal import Foundation

/// Small byte helpers shared by the engine.
package enum Bytes {
    /// Compares two byte sequences in time that depends only on their lengths.
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        // Arrays, the common case, without the generic path's per-byte witness calls.
        guard a.count == b.count else { return false }
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in
                var diff: UInt8 = 0
                for i in 0..<x.count { diff |= x[i] ^ y[i] }
                return diff == 0
            }
        }
    }

    package static func constantTimeEqual(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for (x, y) in zip(a, b) { diff |= x ^ y }
        return diff == 0
    }

    package static func hex(_ bytes: [UInt8]) -> String {
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            digits.withUTF8Buffer { d in
                for (i, b) in bytes.enumerated() {
                    out[2 * i] = d[Int(b >> 4)]
                    out[2 * i + 1] = d[Int(b & 0x0f)]
                }
            }
            return bytes.count * 2
        }
    }

    package static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    package static func fromHex(_ string: String) -> [UInt8]? {
        let chars = Array(string.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = nibble(chars[i]), let lo = nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }

    /// Reads a big-endian unsigned integer of `width` bytes at `offset`.
    @inline(__always)
    package static func readBigEndian<T: FixedWidthInteger>(_ bytes: [UInt8], at offset: Int, as: T.Type) -> T {
        var value: T = 0
        for i in 0..<MemoryLayout<T>.size { value = value << 8 | T(bytes[offset + i]) }
        return value
    }
}

extension Bytes {
    /// Whether two strings are the same UTF-8 bytes. Swift's `==` compares
    /// strings by Unicode canonical equivalence (U+212A KELVIN SIGN equals `K`),
    /// which no browser does; origins, RP IDs, types and JSON member names from
    /// clients are compared with this instead.
    package static func sameUTF8(_ a: String, _ b: String) -> Bool {
        // Equal bytes are canonically equal, so `!=` settles most calls at once (a
        // single comparison for short ASCII strings); equivalent strings go on to the bytes.
        guard a == b else { return false }
        let count = a.utf8.count
        guard count == b.utf8.count else { return false }
        let fast = a.utf8.withContiguousStorageIfAvailable { pa in
            b.utf8.withContiguousStorageIfAvailable { pb -> Bool in
                guard let x = pa.baseAddress, let y = pb.baseAddress else { return true }  // both empty
                return memcmp(x, y, count) == 0
            }
        }
        if let fast, let result = fast { return result }
        return a.utf8.elementsEqual(b.utf8)
    }

    /// Feeds a string's UTF-8 bytes to `hasher`: the hash that goes with ``sameUTF8(_:_:)``
    /// as equality (strings that differ in bytes may hash differently even when Swift's
    /// `==` calls them equal).
    package static func hashUTF8(_ s: String, into hasher: inout Hasher) {
        hasher.combine(s.utf8.count)
        for byte in s.utf8 { hasher.combine(byte) }
    }
}
