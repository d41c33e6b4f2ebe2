internal import Foundation
#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP/1.1 exchange on a connection of its own, run on the calling thread with blocking
/// waits (`poll`) bounded by an idle timeout and a deadline: what ``CappedHTTP`` sends.
///
/// Written here rather than through URLSession because libcurl, under FoundationNetworking,
/// reads and inflates as fast as the peer sends and queues every piece for a delegate that
/// cannot stop it: 1 MB of gzip became 1.1 GB in memory, and a fast endless chunked body grew
/// without bound, whatever cap the delegate kept (red team, tenth pass); a connection that sent
/// nothing kept a core busy. Here a body is read only as far as the cap, compressed bodies and
/// transfer codings other than chunked are refused, and a wait costs nothing.
struct HTTP1Exchange {
    let maxBytes: Int
    let idle: TimeInterval
    let deadline: ContinuousClock.Instant
    /// The deadline in seconds from the start, for messages.
    let limit: TimeInterval
    let redirects: CappedHTTP.Redirects
    let code: WebAuthnError.Code
    let roots: [X509Certificate]?
    /// The proxy `https` fetches go through (those it applies to).
    let proxy: CappedHTTP.Proxy?
    let cancelled: CappedHTTP.Cancellation

    /// The longest response head (status line and header fields) read.
    static let maxHead = 64 * 1024
    /// Redirects followed at most (``CappedHTTP/Redirects/httpsOnly``).
    static let maxRedirects = 5

    func run(_ request: URLRequest) throws(WebAuthnError) -> CappedHTTP.Response {
        var request = request
        // Once a public address answered, a redirect may not lead to one that is not (SSRF: an
        // upstream, or whoever controls it, turning the server's fetch on its own network).
        var publicOnly = false
        for _ in 0...Self.maxRedirects {
            guard let url = request.url else { throw WebAuthnError(code, "no URL") }
            let (response, peerIsPublic) = try exchange(request, url: url, publicOnly: publicOnly)
            publicOnly = publicOnly || peerIsPublic
            guard redirects == .httpsOnly, [301, 302, 303, 307, 308].contains(response.status),
                let location = response.header("location"), let next = URL(string: location, relativeTo: url)?.absoluteURL,
                next.scheme?.lowercased() == "https", CappedHTTP.isFetchable(next)
            else { return response }
            request.url = next
            if response.status == 303 || (request.httpMethod ?? "GET") != "GET" && response.status < 307 {
                request.httpMethod = "GET"
                request.httpBody = nil
            }
        }
        throw WebAuthnError(code, "more than \(Self.maxRedirects) redirects")
    }

    // MARK: One request

    private func what(_ url: URL) -> String { url.host ?? "the endpoint" }

    private func exchange(_ request: URLRequest, url: URL, publicOnly: Bool) throws(WebAuthnError) -> (CappedHTTP.Response, peerIsPublic: Bool) {
        guard CappedHTTP.isFetchable(url), var host = url.host, !host.isEmpty else {
            throw WebAuthnError(code, "\(url.absoluteString.prefix(128)) may not be fetched (https, or http to loopback)")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard CappedHTTP.isValidHost(host) else {
            throw WebAuthnError(code, "the host \(host.debugDescription.prefix(80)) is not a DNS name or an IP address")
        }
        let secure = url.scheme?.lowercased() == "https"
        let port = url.port ?? (secure ? 443 : 80)
        guard (1...65535).contains(port) else { throw WebAuthnError(code, "port \(port) is out of range") }
        let connection: Connection
        let peerIsPublic: Bool
        if secure, let proxy, proxy.applies(to: host) {
            // Through the proxy, which resolves names: after a public endpoint, only a public address
            // or a public DNS name (not `vm`, `intranet`, `127.1`).
            if publicOnly && !(CappedHTTP.literalIsPublic(host) ?? CappedHTTP.isPublicName(host)) {
                throw WebAuthnError(code, "a redirect from a public address may not lead to a loopback, private or link-local one, or to a local name")
            }
            connection = try Connection.open(host: proxy.host, port: proxy.port, exchange: self)
            try tunnel(connection, through: proxy, to: host, port: port)
            // Taken for a public endpoint: a redirect from it fetched directly (NO_PROXY) must be public too.
            peerIsPublic = true
        } else {
            connection = try Connection.open(host: host, port: port, publicOnly: publicOnly, exchange: self)
            peerIsPublic = connection.peerIsPublic
        }
        defer { connection.close() }
        if secure { try connection.startTLS(host: host, roots: roots) }
        try connection.write(try head(of: request, url: url, host: host, port: port, secure: secure) + [UInt8](request.httpBody ?? Data()))
        return (try readResponse(connection, method: request.httpMethod ?? "GET", what: what(url)), peerIsPublic)
    }

    /// Asks the proxy for a tunnel to `host`:`port` (`CONNECT`) and reads its answer: a 2xx head
    /// and nothing after it, else the fetch fails with the proxy's status.
    private func tunnel(_ connection: Connection, through proxy: CappedHTTP.Proxy, to host: String, port: Int) throws(WebAuthnError) {
        do throws(WebAuthnError) {
            try connection.write(proxy.connectHead(host: host, port: port))
            var buffer: [UInt8] = []
            let end = try readHead(connection, into: &buffer, what: "the proxy \(proxy.description)")
            let (status, _) = try parseHead(Array(buffer[..<end]), what: "the proxy \(proxy.description)")
            guard (200...299).contains(status) else {
                let why = status == 407 ? " (proxy authentication required: HTTPS_PROXY's user and password)" : ""
                throw WebAuthnError(code, "the proxy \(proxy.description) refused a tunnel to \(host.prefix(64)):\(port) with \(status)\(why)")
            }
            // Bytes after the head would be taken for the endpoint's TLS: none may come first.
            guard buffer.count == end + 4 else { throw WebAuthnError(code, "the proxy \(proxy.description) sent data before the tunnel opened") }
        } catch {
            connection.close()
            throw error
        }
    }

    /// The request head: the caller's fields, checked (no line breaks in a name or value).
    private func head(of request: URLRequest, url: URL, host: String, port: Int, secure: Bool) throws(WebAuthnError) -> [UInt8] {
        let method = request.httpMethod ?? "GET"
        guard !method.isEmpty, method.utf8.allSatisfy({ (0x41...0x5A).contains($0) }) else { throw WebAuthnError(code, "method \(method.prefix(16))") }
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        var target = components?.percentEncodedPath ?? "/"
        if target.isEmpty { target = "/" }
        if let query = components?.percentEncodedQuery { target += "?" + query }
        let authority = CappedHTTP.bracketed(host) + (port == (secure ? 443 : 80) ? "" : ":\(port)")
        var lines = ["\(method) \(target) HTTP/1.1", "Host: \(authority)", "Connection: close", "Accept-Encoding: identity"]
        let reserved: Set<String> = ["host", "connection", "content-length", "transfer-encoding", "accept-encoding"]
        for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) where !reserved.contains(name.lowercased()) {
            guard Self.isToken(name), !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw WebAuthnError(code, "a request header field cannot be sent as given")
            }
            lines.append("\(name): \(value)")
        }
        if let body = request.httpBody { lines.append("Content-Length: \(body.count)") } else if method == "POST" { lines.append("Content-Length: 0") }
        if request.value(forHTTPHeaderField: "User-Agent") == nil { lines.append("User-Agent: webauthn-engine") }
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    static func isToken(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { b in
                (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || Array("!#$%&'*+-.^_`|~".utf8).contains(b)
            }
    }

    // MARK: The response

    private func readResponse(_ connection: Connection, method: String, what: String) throws(WebAuthnError) -> CappedHTTP.Response {
        var buffer: [UInt8] = []
        while true {
            // The head, interim (1xx) answers skipped.
            let end = try readHead(connection, into: &buffer, what: what)
            let (status, fields) = try parseHead(Array(buffer[..<end]), what: what)
            buffer.removeFirst(end + 4)
            if (100...199).contains(status) { continue }
            var headers: [String: String] = [:]
            for (name, value) in fields where headers.count < 64 || headers[name] != nil {
                headers[name] = headers[name].map { $0 + ", " + value } ?? String(value.prefix(1024))
            }
            if let encoding = headers["content-encoding"], encoding.trimmingCharacters(in: .whitespaces).lowercased() != "identity" {
                throw WebAuthnError(code, "\(what) sent a compressed body (Content-Encoding \(encoding.prefix(32))); only identity is accepted")
            }
            let body: [UInt8]
            if method == "HEAD" || status == 204 || status == 304 {
                body = []
            } else if let coding = headers["transfer-encoding"] {
                guard coding.trimmingCharacters(in: .whitespaces).lowercased() == "chunked" else {
                    throw WebAuthnError(code, "\(what) sent Transfer-Encoding \(coding.prefix(32)); only chunked is read")
                }
                body = try readChunked(connection, buffer: &buffer, what: what)
            } else if let lengths = headers["content-length"] {
                let values = Set(lengths.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                guard values.count == 1, let text = values.first, !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                    let length = Int(text)
                else { throw WebAuthnError(code, "\(what) sent Content-Length \(lengths.prefix(32))") }
                guard length <= maxBytes else { throw WebAuthnError(code, "\(what) announces \(length) bytes; the limit is \(maxBytes)") }
                while buffer.count < length {
                    guard try connection.read(into: &buffer, atMost: length - buffer.count) > 0 else {
                        throw WebAuthnError(code, "\(what) announced \(length) bytes and sent \(buffer.count)")
                    }
                }
                body = Array(buffer.prefix(length))
            } else {
                // Delimited by the end of the connection.
                // What came with the head counts too (a read of nothing more would end the loop at once).
                while buffer.count <= maxBytes, try connection.read(into: &buffer, atMost: maxBytes + 1 - buffer.count) > 0 {}
                guard buffer.count <= maxBytes else { throw WebAuthnError(code, "\(what) sent over \(maxBytes) bytes") }
                body = buffer
            }
            return CappedHTTP.Response(status: status, headers: headers, body: body)
        }
    }

    /// Reads until `buffer` holds a whole head; its length (the offset of the blank line).
    private func readHead(_ connection: Connection, into buffer: inout [UInt8], what: String) throws(WebAuthnError) -> Int {
        var searched = 0
        while true {
            if let end = Self.headEnd(buffer, from: searched) { return end }
            searched = max(0, buffer.count - 3)
            guard buffer.count < Self.maxHead else { throw WebAuthnError(code, "\(what) sent a response head over \(Self.maxHead) bytes") }
            guard try connection.read(into: &buffer, atMost: Self.maxHead - buffer.count) > 0 else {
                throw WebAuthnError(code, "\(what) closed the connection before a whole response head")
            }
        }
    }

    static func headEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var i = start
        while i + 3 < bytes.count {
            if bytes[i] == 0x0D, bytes[i + 1] == 0x0A, bytes[i + 2] == 0x0D, bytes[i + 3] == 0x0A { return i }
            i += 1
        }
        return nil
    }

    /// The status and the header fields (names lowercased, values trimmed) of a head.
    private func parseHead(_ head: [UInt8], what: String) throws(WebAuthnError) -> (Int, [(String, String)]) {
        let lines = head.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
            line.last == 0x0D ? line.dropLast() : line[...]
        }
        guard let statusLine = lines.first.map({ String(decoding: $0, as: UTF8.self) }) else { throw WebAuthnError(code, "\(what) sent no status line") }
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].utf8.count == 3, let status = Int(parts[1]), (100...599).contains(status) else {
            throw WebAuthnError(code, "\(what) sent a status line that is not HTTP/1.x: \(statusLine.prefix(64))")
        }
        var fields: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let first = line.first, first != 0x20, first != 0x09, let colon = line.firstIndex(of: 0x3A) else {
                throw WebAuthnError(code, "\(what) sent a malformed header field")
            }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
            guard Self.isToken(name) else { throw WebAuthnError(code, "\(what) sent a malformed header field name") }
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: .whitespaces)
            fields.append((name.lowercased(), value))
        }
        return (status, fields)
    }

    /// A chunked body, at most `maxBytes` of data; trailers read and dropped.
    private func readChunked(_ connection: Connection, buffer: inout [UInt8], what: String) throws(WebAuthnError) -> [UInt8] {
        var body: [UInt8] = []
        func line() throws(WebAuthnError) -> [UInt8] {
            var searched = 0
            while true {
                if let end = buffer[searched...].firstIndex(of: 0x0A) {
                    let text = Array(buffer[..<end])
                    buffer.removeFirst(end + 1)
                    return text.last == 0x0D ? Array(text.dropLast()) : text
                }
                searched = buffer.count
                guard buffer.count < 4096 else { throw WebAuthnError(code, "\(what) sent a chunk line over 4096 bytes") }
                guard try connection.read(into: &buffer, atMost: 4096) > 0 else { throw WebAuthnError(code, "\(what) ended a chunked body early") }
            }
        }
        while true {
            let sizeLine = try line()
            let digits = sizeLine.prefix { $0 != 0x3B }.filter { $0 != 0x20 && $0 != 0x09 }  // before any extension
            // Hex digits only: Int(_:radix:) also takes a sign, and a size of -1 indexed before the buffer.
            let isHex = digits.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0) }
            guard !digits.isEmpty, digits.count <= 15, isHex, let size = Int(String(decoding: digits, as: UTF8.self), radix: 16) else {
                throw WebAuthnError(code, "\(what) sent a malformed chunk size")
            }
            if size == 0 {
                var trailers = 0
                while try !line().isEmpty {
                    trailers += 1
                    guard trailers <= 64 else { throw WebAuthnError(code, "\(what) sent over 64 trailer fields") }
                }
                return body
            }
            guard size <= maxBytes - body.count else { throw WebAuthnError(code, "\(what) sent over \(maxBytes) bytes") }
            while buffer.count < size + 2 {
                guard try connection.read(into: &buffer, atMost: size + 2 - buffer.count) > 0 else {
                    throw WebAuthnError(code, "\(what) ended a chunked body early")
                }
            }
            guard buffer[size] == 0x0D, buffer[size + 1] == 0x0A else { throw WebAuthnError(code, "\(what) sent a chunk without its line end") }
            body.append(contentsOf: buffer[..<size])
            buffer.removeFirst(size + 2)
        }
    }
}
