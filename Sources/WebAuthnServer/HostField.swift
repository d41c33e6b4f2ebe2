/// The value of a `Host` field, checked against its grammar (RFC 9112 §3.2, RFC 3986 §3.2.2–3.2.3).
///
/// RFC 9112 §3.2: a server answers `400` to a request whose `Host` is not valid. No route reads
/// `Host`; the check keeps a proxy in front and this server from reading one request two ways.
enum HostField {
    /// Whether `value`, without the whitespace around it (not part of a field value), is RFC 3986's
    /// `uri-host [":" port]`: an IP-literal in brackets (an IPv6 address, or `v` and a hex version,
    /// a dot and its text), or a reg-name (unreserved characters, sub-delims, and `%` with two hex
    /// digits; an IPv4 address is one), then an optional port of at most 65535. An empty value is
    /// allowed (RFC 9110 §7.2: a target without an authority); an empty host with a port (`:80`) is
    /// not, as the absolute form `http://:80/` is not. A check of characters alone let `a:99999x`,
    /// `[::1` and `a%zz` through (second re-check of the fifteenth red-team pass).
    static func isValid(_ value: String) -> Bool {
        let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var bytes = Array(value.utf8)[...]
        while let first = bytes.first, blank(first) { bytes = bytes.dropFirst() }
        while let last = bytes.last, blank(last) { bytes = bytes.dropLast() }
        let port: ArraySlice<UInt8>
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), isIPLiteral(bytes[(bytes.startIndex + 1)..<close]) else { return false }
            port = bytes[(close + 1)...]
        } else {
            let colon = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.endIndex
            guard isRegName(bytes[..<colon]), colon > bytes.startIndex || bytes.isEmpty else { return false }
            port = bytes[colon...]
        }
        return isPort(port)
    }

    /// Nothing, or `:` and at most five digits worth 65535 at most (RFC 3986 allows an empty port).
    static func isPort(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard let colon = bytes.first else { return true }
        let digits = bytes.dropFirst()
        guard colon == UInt8(ascii: ":"), digits.count <= 5, digits.allSatisfy(isDigit) else { return false }
        return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } <= 65535
    }

    /// RFC 3986's reg-name: unreserved, sub-delims, and `%` followed by two hex digits.
    static func isRegName(_ bytes: ArraySlice<UInt8>) -> Bool {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.endIndex, isHexDigit(bytes[i + 1]), isHexDigit(bytes[i + 2]) else { return false }
                i += 3
            } else {
                guard regNameCharacters.contains(bytes[i]) else { return false }
                i += 1
            }
        }
        return true
    }

    /// The inside of RFC 3986's IP-literal: an IPv6 address, or IPvFuture (`v`, hex digits, `.`,
    /// then unreserved, sub-delims or `:`).
    static func isIPLiteral(_ bytes: ArraySlice<UInt8>) -> Bool {
        if let first = bytes.first, first | 0x20 == UInt8(ascii: "v") {
            guard let dot = bytes.firstIndex(of: UInt8(ascii: ".")), dot > bytes.startIndex + 1 else { return false }
            let version = bytes[(bytes.startIndex + 1)..<dot]
            let text = bytes[(dot + 1)...]
            return version.allSatisfy(isHexDigit) && !text.isEmpty && text.allSatisfy { regNameCharacters.contains($0) || $0 == UInt8(ascii: ":") }
        }
        return isIPv6(bytes)
    }

    /// RFC 3986's IPv6address: eight groups of one to four hex digits, or fewer around one `::`,
    /// the last two groups possibly an IPv4 address.
    static func isIPv6(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard bytes.count <= 45 else { return false }
        let text = Array(bytes)
        let colon = UInt8(ascii: ":")
        // Where `::` is, if anywhere; a second one, or `:::`, is refused.
        let doubles = text.indices.dropLast().filter { text[$0] == colon && text[$0 + 1] == colon }
        guard doubles.count <= 1 else { return false }
        let sides: [ArraySlice<UInt8>] = doubles.first.map { [text[..<$0], text[($0 + 2)...]] } ?? [text[...]]
        var count = 0
        for (side, part) in sides.enumerated() where !part.isEmpty {
            let groups = part.split(separator: colon, omittingEmptySubsequences: false)
            for (index, group) in groups.enumerated() {
                if side == sides.count - 1, index == groups.count - 1, group.contains(UInt8(ascii: ".")) {
                    guard isIPv4(group) else { return false }
                    count += 2
                } else {
                    guard (1...4).contains(group.count), group.allSatisfy(isHexDigit) else { return false }
                    count += 1
                }
            }
        }
        return doubles.isEmpty ? count == 8 : count <= 7
    }

    /// Four decimal numbers of at most 255, without leading zeros, joined by dots.
    static func isIPv4(_ bytes: ArraySlice<UInt8>) -> Bool {
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy { part in
                !part.isEmpty && part.count <= 3 && part.allSatisfy(isDigit) && (part.count == 1 || part.first != UInt8(ascii: "0"))
                    && part.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } <= 255
            }
    }

    static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
    static func isHexDigit(_ byte: UInt8) -> Bool { isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20) }

    /// RFC 3986's unreserved characters and sub-delims.
    static let regNameCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=".utf8)
}
