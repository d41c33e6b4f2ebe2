/// A bounded reader for DER (X.690), for the few structures OpenSSL has no
/// accessor for: Android's KeyDescription, the TPM subject alternative name,
/// extended key usage. Definite lengths only, nesting bounded, every length
/// checked against what remains; nothing is allocated up front.
package struct DER {
    /// Identifier octets (X.690 §8.1.2): the universal tags of the structures read and
    /// written here, and the parts of a tag byte (class, constructed, number).
    package enum Tag {
        package static let boolean: UInt8 = 0x01
        package static let integer: UInt8 = 0x02
        package static let octetString: UInt8 = 0x04
        package static let null: UInt8 = 0x05
        package static let objectIdentifier: UInt8 = 0x06
        package static let enumerated: UInt8 = 0x0A
        package static let utf8String: UInt8 = 0x0C
        /// SEQUENCE and SEQUENCE OF (always constructed).
        package static let sequence: UInt8 = 0x30
        /// SET and SET OF (always constructed).
        package static let set: UInt8 = 0x31
        /// The class bits; ``contextSpecific`` is one of their values.
        package static let classMask: UInt8 = 0xC0
        package static let contextSpecific: UInt8 = 0x80
        /// The bit of a constructed encoding.
        package static let constructed: UInt8 = 0x20
        /// The tag number bits; all set means the number follows in base-128 bytes.
        package static let numberMask: UInt8 = 0x1F
        /// A context-specific constructed tag `[n]`, as EXPLICIT tagging and CHOICE
        /// alternatives use it (`n` below 31: one byte).
        package static func contextConstructed(_ n: UInt8) -> UInt8 { contextSpecific | constructed | n }
    }

    /// One TLV: the tag byte, and the contents as a range of `bytes`.
    package struct Node {
        package let tag: UInt8
        package let bytes: [UInt8]
        package let contents: Range<Int>

        package var isConstructed: Bool { tag & Tag.constructed != 0 }
        package var value: ArraySlice<UInt8> { bytes[contents] }

        /// The children of a constructed node.
        package func children() throws(WebAuthnError) -> [Node] {
            guard isConstructed else { throw DER.error("expected a constructed value") }
            var reader = DER(bytes, range: contents)
            var out: [Node] = []
            while !reader.atEnd {
                guard out.count < 4096 else { throw DER.error("too many elements") }
                out.append(try reader.next())
            }
            return out
        }

        /// An INTEGER as Int (at most 8 bytes, two's complement).
        package func integer() throws(WebAuthnError) -> Int {
            guard tag == Tag.integer || tag == Tag.enumerated, (1...8).contains(contents.count) else { throw DER.error("expected a small INTEGER") }
            var v = Int(Int8(bitPattern: bytes[contents.lowerBound]))
            for b in value.dropFirst() { v = v << 8 | Int(b) }
            return v
        }

        /// An OBJECT IDENTIFIER in dotted form.
        package func objectIdentifier() throws(WebAuthnError) -> String {
            guard tag == Tag.objectIdentifier, !contents.isEmpty, contents.count <= 64 else { throw DER.error("expected an OBJECT IDENTIFIER") }
            var parts: [UInt64] = []
            var acc: UInt64 = 0
            for b in value {
                guard acc < (1 << 56) else { throw DER.error("OBJECT IDENTIFIER arc too large") }
                acc = acc << 7 | UInt64(b & 0x7f)
                if b & 0x80 == 0 { parts.append(acc); acc = 0 }
            }
            guard bytes[contents.upperBound - 1] & 0x80 == 0, let first = parts.first else { throw DER.error("truncated OBJECT IDENTIFIER") }
            let head = first < 80 ? [first / 40, first % 40] : [2, first - 80]
            return (head + parts.dropFirst()).map(String.init).joined(separator: ".")
        }
    }

    package static let maxDepth = 16

    package let bytes: [UInt8]
    private var position: Int
    private let end: Int

    package init(_ bytes: [UInt8], range: Range<Int>? = nil) {
        self.bytes = bytes
        position = range?.lowerBound ?? 0
        end = range?.upperBound ?? bytes.count
    }

    package var atEnd: Bool { position >= end }

    package static func error(_ message: String) -> WebAuthnError {
        WebAuthnError(.attestationCertificateInvalid, "malformed DER: \(message)")
    }

    /// Reads the next TLV (single-byte tags only, as in the structures read here).
    package mutating func next() throws(WebAuthnError) -> Node {
        guard position + 2 <= end else { throw Self.error("truncated") }
        let tag = bytes[position]
        guard tag & Tag.numberMask != Tag.numberMask else {
            // High tag numbers (Android KeyDescription's AuthorizationList uses them).
            return try nextHighTag()
        }
        var p = position + 1
        let length = try readLength(&p)
        guard length <= end - p else { throw Self.error("length runs past the end") }
        position = p + length
        return Node(tag: tag, bytes: bytes, contents: p..<(p + length))
    }

    /// A tag with a multi-byte number; the node's `tag` keeps the class and
    /// constructed bits, and `highTagNumber` is returned through `taggedNext`.
    private mutating func nextHighTag() throws(WebAuthnError) -> Node {
        let (node, _) = try taggedNext()
        return node
    }

    /// Reads the next TLV and its full tag number (context-specific tags above 30).
    package mutating func taggedNext() throws(WebAuthnError) -> (Node, Int) {
        guard position + 2 <= end else { throw Self.error("truncated") }
        let first = bytes[position]
        var p = position + 1
        var number = Int(first & Tag.numberMask)
        if number == Int(Tag.numberMask) {
            number = 0
            for i in 0..<4 {
                guard p < end else { throw Self.error("truncated tag") }
                let b = bytes[p]
                p += 1
                number = number << 7 | Int(b & 0x7f)
                if b & 0x80 == 0 { break }
                if i == 3 { throw Self.error("tag number too large") }
            }
        }
        let length = try readLength(&p)
        guard length <= end - p else { throw Self.error("length runs past the end") }
        position = p + length
        return (
            Node(tag: first & ~Tag.numberMask | (number < Int(Tag.numberMask) ? UInt8(number) : Tag.numberMask), bytes: bytes, contents: p..<(p + length)),
            number
        )
    }

    private func readLength(_ p: inout Int) throws(WebAuthnError) -> Int {
        guard p < end else { throw Self.error("truncated length") }
        let first = bytes[p]
        p += 1
        if first < 0x80 { return Int(first) }
        let count = Int(first & 0x7f)
        guard count >= 1, count <= 4 else { throw Self.error("indefinite or oversized length") }
        guard p + count <= end else { throw Self.error("truncated length") }
        var length = 0
        for _ in 0..<count { length = length << 8 | Int(bytes[p]); p += 1 }  // at most 4 bytes: no overflow
        guard length >= 0x80 || count == 0 else { throw Self.error("non-minimal length") }
        return length
    }

    /// A DER length (X.690 §8.1.3): one byte below 128, else 0x80 + n and n
    /// big-endian bytes. Lengths are never negative, and no byte is truncated.
    package static func encodeLength(_ length: Int) -> [UInt8] {
        let n = UInt(max(length, 0))
        if n < 0x80 { return [UInt8(truncatingIfNeeded: n)] }
        var bytes: [UInt8] = []
        var rest = n
        while rest > 0 {
            bytes.insert(UInt8(truncatingIfNeeded: rest), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(truncatingIfNeeded: bytes.count)] + bytes
    }

    /// Parses `bytes` as exactly one TLV.
    package static func parse(_ bytes: [UInt8]) throws(WebAuthnError) -> Node {
        var reader = DER(bytes)
        let node = try reader.next()
        guard reader.atEnd else { throw error("trailing bytes") }
        return node
    }
}
