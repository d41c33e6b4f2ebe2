internal import Foundation

// Shortcuts for ASCII names, most names a site sees. Each gives exactly what the full rules give
// (`UserNameTests.asciiShortcuts` compares them over every ASCII character and random names);
// they skip Foundation's normal forms, whose bridging took most of the time a named sign-in spent
// on its name, and the per-character Unicode property lookups (a server profile, issue 13).
extension UserName {
    /// Unicode's normal forms. An ASCII string is its own NFC, NFD, NFKC and NFKD (no ASCII
    /// character has a canonical or a compatibility decomposition).
    static func nfc(_ s: String) -> String { isASCII(s) ? s : s.precomposedStringWithCanonicalMapping }
    static func nfd(_ s: String) -> String { isASCII(s) ? s : s.decomposedStringWithCanonicalMapping }
    static func nfkc(_ s: String) -> String { isASCII(s) ? s : s.precomposedStringWithCompatibilityMapping }
    static func nfkd(_ s: String) -> String { isASCII(s) ? s : s.decomposedStringWithCompatibilityMapping }
    static func isASCII(_ s: String) -> Bool { s.utf8.allSatisfy { $0 < 0x80 } }

    /// Whether `raw` is its own enforced form because it is 1 to ``maxCharacters`` printable ASCII
    /// characters (`!`…`~`): no width mapping, normalisation, mark, script mix or direction rule
    /// applies to them, and each is a Latin letter, a digit 0–9 or printable ASCII.
    static func isPlainASCIIName(_ raw: String) -> Bool {
        let utf8 = raw.utf8
        return !utf8.isEmpty && utf8.count <= maxCharacters && utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// The look-alike key of an ASCII name whose every character's key is ASCII: the characters'
    /// keys one after the other. Every step of ``lookalikeKeyInFull(_:)`` then works one
    /// character at a time (the capital folding and the images by table, lowercasing by
    /// character, the normal forms do nothing), and the one rule with a context, a dot above
    /// after a soft-dotted letter, needs U+0307, which is not ASCII. `nil` otherwise.
    static func asciiLookalikeKey(_ name: String) -> String? {
        let keys = asciiKeys
        var key: [UInt8] = []
        key.reserveCapacity(name.utf8.count)
        for byte in name.utf8 {
            guard byte < 0x80, let image = keys[Int(byte)] else { return nil }
            key.append(contentsOf: image)
        }
        return String(decoding: key, as: UTF8.self)
    }

    /// Each ASCII character's look-alike key, where its capital folding and its key are ASCII.
    static let asciiKeys: [[UInt8]?] = (0..<0x80).map { (byte: UInt8) -> [UInt8]? in
        let scalar = Unicode.Scalar(byte)
        if let capital = SkeletonTables.shared.capitals[scalar.value], !capital.allSatisfy(\.isASCII) { return nil }
        let key = lookalikeKeyInFull(String(scalar))
        return isASCII(key) ? Array(key.utf8) : nil
    }
}
