internal import Foundation
package import _WebAuthnEncoding

#if canImport(Glibc)
    import Glibc
#endif

extension CappedHTTP {
    /// An HTTP proxy that `https` fetches go through (`CONNECT`, then TLS to the endpoint inside
    /// the tunnel, so the proxy sees the endpoint's name and port and nothing else): the metadata
    /// service, the passkey-provider list and Sign in with Apple's endpoints from a network whose
    /// only way out is a proxy. Read from the environment as curl and most HTTP clients read it
    /// (``fromEnvironment(_:)``). `http` fetches go to loopback only and are never proxied.
    package struct Proxy: Sendable, Equatable {
        /// The proxy's host name or address (an IPv6 address without brackets) and port.
        package let host: String
        package let port: Int
        /// `Proxy-Authorization: Basic …` from the URL's user and password, if it has them.
        package let authorization: String?
        /// Hosts fetched directly (`NO_PROXY`): names that match it or end in `.` and it, lowercased.
        package let bypass: [String]
        /// Addresses fetched directly (`NO_PROXY` addresses and ranges, `10.0.0.0/8`, `fd00::/8`):
        /// they match hosts that are IP address literals, compared as addresses.
        package let bypassRanges: [AddressRange]
        /// Whether every host is fetched directly (`NO_PROXY=*`).
        package let bypassesAll: Bool
        /// Whether loopback hosts go through the proxy too (tests); else they never do.
        package let proxiesLoopback: Bool

        package init(
            host: String, port: Int, authorization: String? = nil, bypass: [String] = [], bypassRanges: [AddressRange] = [], bypassesAll: Bool = false,
            proxiesLoopback: Bool = false
        ) {
            self.host = host
            self.port = port
            self.authorization = authorization
            self.bypass = bypass
            self.bypassRanges = bypassRanges
            self.bypassesAll = bypassesAll
            self.proxiesLoopback = proxiesLoopback
        }

        /// The proxy for `https` fetches that `environment` names: `HTTPS_PROXY` (or `https_proxy`),
        /// `http://[user:password@]host:port` or `host:port`, with hosts in `NO_PROXY` (or
        /// `no_proxy`: comma-separated names, each also matching its sub-domains, with an optional
        /// leading `.` or `*.` and an optional `:port`; IP addresses and CIDR ranges, which match
        /// hosts that are address literals, as curl 7.86 and later read them; or `*` for all)
        /// fetched directly. An entry that is none of these is ignored. Nil when
        /// none is set (or it is empty). A value this client cannot use (another scheme, no port, a
        /// path) is an error, not a silent direct connection.
        package static func fromEnvironment(_ environment: [String: String]) throws(WebAuthnError) -> Proxy? {
            // As curl: the lower-case name first; an empty value counts as unset.
            func setting(_ names: String...) -> String {
                names.lazy.compactMap { environment[$0]?.trimmingCharacters(in: .whitespaces) }.first { !$0.isEmpty } ?? ""
            }
            let value = setting("https_proxy", "HTTPS_PROXY")
            guard !value.isEmpty else { return nil }
            let text = value.contains("://") ? value : "http://" + value
            func refuse(_ why: String) -> WebAuthnError {
                WebAuthnError(.configurationInvalid, "HTTPS_PROXY \(why); expected http://[user:password@]host:port")
            }
            guard let url = URLComponents(string: text), url.scheme?.lowercased() == "http" else {
                throw refuse("is not an http:// proxy URL (TLS and SOCKS proxies are not supported)")
            }
            guard var host = url.host, !host.isEmpty else { throw refuse("names no host") }
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard let port = url.port, (1...65535).contains(port) else { throw refuse("names no port (1 to 65535)") }
            guard url.percentEncodedPath.isEmpty || url.percentEncodedPath == "/", url.query == nil, url.fragment == nil else {
                throw refuse("has a path, query or fragment")
            }
            var authorization: String?
            if let user = url.user {
                let credentials = user + ":" + (url.password ?? "")
                guard !credentials.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { throw refuse("has control characters in its credentials") }
                authorization = "Basic " + Data(credentials.utf8).base64EncodedString()
            }
            let list = setting("no_proxy", "NO_PROXY").split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces).lowercased()
            }
            var bypass: [String] = []
            var ranges: [AddressRange] = []
            var all = false
            for var entry in list where !entry.isEmpty {
                if entry == "*" {
                    all = true
                    continue
                }
                if entry.contains("/") {
                    if let range = AddressRange(entry) { ranges.append(range) }
                    continue
                }
                if entry.hasPrefix("*.") { entry.removeFirst(2) } else if entry.hasPrefix(".") { entry.removeFirst() }
                if entry.hasPrefix("[") {
                    // [v6] or [v6]:port
                    guard let close = entry.firstIndex(of: "]") else { continue }
                    entry = String(entry[entry.index(after: entry.startIndex)..<close])
                } else if entry.filter({ $0 == ":" }).count == 1, let colon = entry.firstIndex(of: ":") {
                    entry = String(entry[..<colon])  // name:port or v4:port
                }
                guard !entry.isEmpty else { continue }
                bypass.append(entry)
                if let address = AddressRange(entry) { ranges.append(address) }  // `fd00::5` matches `fd00:0::5` too
            }
            return Proxy(host: host, port: port, authorization: authorization, bypass: bypass, bypassRanges: ranges, bypassesAll: all)
        }

        /// Whether a fetch of `host` goes through this proxy.
        package func applies(to host: String) -> Bool {
            guard !bypassesAll else { return false }
            var name = host.lowercased()
            if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
            if name.hasSuffix(".") { name.removeLast() }
            if !proxiesLoopback, ["localhost", "127.0.0.1", "::1"].contains(name) || name.hasSuffix(".localhost") { return false }
            if let address = AddressRange.address(name) { return !bypassRanges.contains { $0.contains(address) } }
            return !bypass.contains { name == $0 || name.hasSuffix("." + $0) }
        }

        /// What `CONNECT` asks the proxy for: the endpoint's authority.
        func connectHead(host: String, port: Int) -> [UInt8] {
            let authority = CappedHTTP.bracketed(host) + ":\(port)"
            var lines = ["CONNECT \(authority) HTTP/1.1", "Host: \(authority)", "User-Agent: webauthn-engine"]
            if let authorization { lines.append("Proxy-Authorization: \(authorization)") }
            return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
        }

        /// The proxy for display: its host and port, never its credentials.
        package var description: String { CappedHTTP.bracketed(host) + ":\(port)" }
    }

    /// The proxy this process's environment names (``Proxy/fromEnvironment(_:)``), read once:
    /// what ``send(_:maxBytes:timeout:deadline:redirects:roots:proxy:failure:)`` uses unless told
    /// otherwise. A malformed setting fails every fetch with its reason (a server checks it when it
    /// starts).
    package static let environmentProxy: Result<Proxy?, WebAuthnError> = Result { () throws(WebAuthnError) in
        try Proxy.fromEnvironment(ProcessInfo.processInfo.environment)
    }

    /// An IPv4 or IPv6 address range (`NO_PROXY`'s `10.0.0.0/8`, `fd00::/8`, or one address).
    package struct AddressRange: Sendable, Equatable {
        /// The address's bytes (4 or 16), and how many leading bits a match shares with them.
        let address: [UInt8]
        let bits: Int

        /// `address` or `address/bits`, the address in its standard form (`inet_pton`: no legacy
        /// IPv4 forms, no brackets); nil for anything else, or bits past the address's length.
        init?(_ text: String) {
            let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = Self.address(String(parts[0])) else { return nil }
            var bits = address.count * 8
            if parts.count == 2 {
                guard let given = Int(parts[1]), parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) }), (0...bits).contains(given) else { return nil }
                bits = given
            }
            self.address = address
            self.bits = bits
        }

        /// The bytes of an IPv4 (4) or IPv6 (16) address in its standard form; nil otherwise.
        static func address(_ text: String) -> [UInt8]? {
            var v4 = in_addr(), v6 = in6_addr()
            if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: v4) { Array($0) } }
            if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: v6) { Array($0) } }
            return nil
        }

        /// Whether `other` (an address's bytes) is in the range: same family, same leading bits.
        func contains(_ other: [UInt8]) -> Bool {
            guard other.count == address.count else { return false }
            let whole = bits / 8, rest = bits % 8
            guard other.prefix(whole) == address.prefix(whole) else { return false }
            guard rest > 0 else { return true }
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - rest))
            return other[whole] & mask == address[whole] & mask
        }
    }

    /// An IPv6 address in brackets, as a URL authority writes it; anything else as it is.
    static func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    /// Whether `host`, an IP address literal, is a public address (``isPublic(_:)``); nil when it
    /// is not a literal. The legacy IPv4 forms count as literals (`127.1`, `2130706433`,
    /// `0x7f000001`: the C resolver reads them as addresses).
    static func literalIsPublic(_ host: String) -> Bool? {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 || inet_aton(host, &v4) != 0 { return isPublicIPv4(UInt32(bigEndian: v4.s_addr)) }
        if inet_pton(AF_INET6, host, &v6) == 1 { return isPublicIPv6(withUnsafeBytes(of: v6) { Array($0) }) }
        return nil
    }

    /// Whether `host` is an IP address literal that is not a public one (a redirect from a public
    /// endpoint may not name one, through a proxy either).
    package static func isNonPublicLiteral(_ host: String) -> Bool { literalIsPublic(host) == false }

    /// Whether `host` (brackets removed) may be connected to at all: an IPv4 or IPv6 address, or a
    /// DNS name (labels of letters, digits and hyphens, 1 to 63 characters, not starting or ending
    /// with a hyphen, 253 in all, an optional final dot). Nothing else reaches a socket or a proxy's
    /// `CONNECT` line: a redirect's host is percent-decoded, and a bare CR, a space or a NUL in it
    /// split the proxy's request or told the proxy another name than TLS checks (red team,
    /// twelfth pass).
    package static func isValidHost(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1 { return true }
        var name = Substring(host)
        if name.hasSuffix(".") { name = name.dropLast() }
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            (1...63).contains(label.utf8.count) && label.utf8.first != 0x2D && label.utf8.last != 0x2D
                && label.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D }
        }
    }

    /// Whether a name, fetched through a proxy after a public endpoint redirected to it, may be
    /// asked for: two labels or more, the last not all digits nor hex (a public DNS name); else
    /// the proxy would resolve `vm`, `intranet` or `2130706433` inside the network.
    package static func isPublicName(_ host: String) -> Bool {
        var name = Substring(host)
        if name.hasSuffix(".") { name = name.dropLast() }
        let labels = name.split(separator: ".")
        guard labels.count >= 2, let last = labels.last else { return false }
        return !last.utf8.allSatisfy { (0x30...0x39).contains($0) } && !last.lowercased().hasPrefix("0x")
    }
}
