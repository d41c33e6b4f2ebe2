/// base64url (RFC 4648 §5) without padding, as WebAuthn's `toJSON()` produces.
///
/// Encoding is always unpadded base64url. Decoding is liberal where it costs
/// nothing (the encoding is transport, never signed, and the engine compares
/// decoded bytes only): it accepts `=` padding, the standard alphabet's `+`
/// and `/` (some fixtures and older clients send it) and non-zero trailing
/// bits; it rejects white space, misplaced padding and any other byte.
package enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xff, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
        table[Int(UInt8(ascii: "+"))] = 62
        table[Int(UInt8(ascii: "/"))] = 63
        return table
    }()

    /// Encodes bytes as unpadded base64url.
    package static func encode(_ bytes: [UInt8]) -> String {
        // Arrays, the common case, through their buffer (no generic iterator across modules).
        bytes.withUnsafeBufferPointer { encode($0) }
    }

    package static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var it = bytes.makeIterator()
        while let b0 = it.next() {
            let b1 = it.next(), b2 = it.next()
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 { out.append(alphabet[Int((b1 & 0x0f) << 2 | (b2 ?? 0) >> 6)]) }
            if let b2 { out.append(alphabet[Int(b2 & 0x3f)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes base64url, or returns nil if the text is not base64url.
    package static func decode(_ string: String) -> [UInt8]? {
        var s = string
        return s.withUTF8 { decode(utf8: $0) }
    }

    /// The decoding table, allocated once: 0xff marks bytes outside both alphabets.
    nonisolated(unsafe) private static let table: UnsafePointer<UInt8> = {
        let t = UnsafeMutablePointer<UInt8>.allocate(capacity: 256)
        t.initialize(repeating: 0xff, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(UInt8(ascii: "+"))] = 62
        t[Int(UInt8(ascii: "/"))] = 63
        return UnsafePointer(t)
    }()

    /// Decodes base64url from UTF-8 bytes.
    package static func decode(utf8 input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var n = input.count
        // Up to two '=' of padding, only when the total length is a multiple of 4.
        if n > 0, input[n - 1] == UInt8(ascii: "=") {
            guard n % 4 == 0 else { return nil }
            n -= 1
            if input[n - 1] == UInt8(ascii: "=") { n -= 1 }
        }
        if n % 4 == 1 { return nil }
        let t = table
        let full = n / 4
        let rest = n % 4
        let outCount = full * 3 + (rest == 0 ? 0 : rest - 1)
        var valid = true
        let out = [UInt8](unsafeUninitializedCapacity: outCount) { buffer, count in
            guard let src = input.baseAddress, let dst = buffer.baseAddress else { count = 0; return }
            var i = 0, o = 0
            for _ in 0..<full {
                let a = t[Int(src[i])], b = t[Int(src[i + 1])], c = t[Int(src[i + 2])], d = t[Int(src[i + 3])]
                if (a | b | c | d) & 0xc0 != 0 { valid = false; break }
                dst[o] = a << 2 | b >> 4
                dst[o + 1] = b << 4 | c >> 2
                dst[o + 2] = c << 6 | d
                i += 4
                o += 3
            }
            if valid && rest >= 2 {
                let a = t[Int(src[i])], b = t[Int(src[i + 1])]
                if (a | b) & 0xc0 != 0 {
                    valid = false
                } else {
                    dst[o] = a << 2 | b >> 4
                    o += 1
                    if rest == 3 {
                        let c = t[Int(src[i + 2])]
                        if c & 0xc0 != 0 { valid = false } else { dst[o] = b << 4 | c >> 2; o += 1 }
                    }
                }
            }
            count = valid ? o : 0
            if !valid { count = 0 }
        }
        return valid ? out : nil
    }
}
