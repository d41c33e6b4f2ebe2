internal import Foundation
import Synchronization
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A minimal HTTP/1.1 server on 127.0.0.1 for stand-ins in tests: one thread
/// accepts, one thread per connection answers one request and closes
/// (`Connection: close`). Heads are capped at 16 KiB, bodies at 1 MiB, reads
/// time out after 5 s. Not for production: it exists so tests need no HTTP stack.
package final class LoopbackHTTPServer: Sendable {
    package struct Request: Sendable {
        package let method: String
        package let path: String
        package let query: [(String, String)]
        package let headers: [(String, String)]
        package let body: [UInt8]

        package func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    package struct Response: Sendable {
        package var status: Int
        package var contentType: String
        package var body: [UInt8]
        package var headers: [(String, String)] = []
        /// Leave out Content-Length (the body then ends when the connection closes), as a hostile server may.
        package var announcesLength = true

        package init(status: Int, contentType: String, body: [UInt8], headers: [(String, String)] = [], announcesLength: Bool = true) {
            self.status = status
            self.contentType = contentType
            self.body = body
            self.headers = headers
            self.announcesLength = announcesLength
        }

        package static func json(_ status: Int, _ text: String) -> Response {
            Response(status: status, contentType: "application/json", body: Array(text.utf8))
        }
    }

    /// The port the server listens on.
    package let port: Int
    private let socket: Int32
    private let stopped = Atomic<Bool>(false)
    private let handler: @Sendable (Request) -> Response

    package init(handler: @escaping @Sendable (Request) -> Response) throws {
        #if os(Linux)
            let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw ServerError("socket() failed: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(0).bigEndian
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw ServerError("cannot listen on 127.0.0.1: \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            close(fd)
            throw ServerError("getsockname() failed: \(errno)")
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        self.socket = fd
        self.handler = handler
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    struct ServerError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Stops accepting; connections being answered finish.
    package func stop() {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
    }

    deinit { stop() }

    private func acceptLoop() {
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let connection = accept(socket, nil, nil)
            if connection < 0 {
                if stopped.load(ordering: .sequentiallyConsistent) { return }
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            let thread = Thread { [self] in serve(connection) }
            thread.start()
        }
    }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let response: Response
        if let request = read(connection) {
            response = handler(request)
        } else {
            response = Response(status: 400, contentType: "text/plain", body: Array("bad request\n".utf8))
        }
        write(response, to: connection)
    }

    private static let maxHead = 16 * 1024
    private static let maxBody = 1 << 20

    private func read(_ connection: Int32) -> Request? {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 8192)
        var headEnd: Int?
        while headEnd == nil {
            let n = recv(connection, &buffer, buffer.count, 0)
            guard n > 0 else { return nil }
            data += buffer[0..<n]
            headEnd = Self.find([13, 10, 13, 10], in: data)
            if headEnd == nil, data.count > Self.maxHead { return nil }
        }
        guard let headEnd, headEnd <= Self.maxHead else { return nil }
        let head = String(decoding: data[0..<headEnd], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count == 3 else { return nil }
        var headers: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let length = headers.first { $0.0.lowercased() == "content-length" }.map { Int($0.1) } ?? 0
        guard let length, (0...Self.maxBody).contains(length) else { return nil }
        var body = Array(data[(headEnd + 4)...])
        while body.count < length {
            let n = recv(connection, &buffer, min(buffer.count, length - body.count), 0)
            guard n > 0 else { return nil }
            body += buffer[0..<n]
        }
        guard body.count == length else { return nil }
        let target = String(requestLine[1])
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let query = parts.count == 2 ? FormCoding.decode(String(parts[1])) : []
        return Request(method: String(requestLine[0]), path: String(parts[0]), query: query, headers: headers, body: body)
    }

    private static func find(_ needle: [UInt8], in data: [UInt8]) -> Int? {
        guard data.count >= needle.count else { return nil }
        for i in 0...(data.count - needle.count) where data[i..<(i + needle.count)].elementsEqual(needle) { return i }
        return nil
    }

    private func write(_ response: Response, to connection: Int32) {
        var head = "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n"
        head += "Content-Type: \(response.contentType)\r\nConnection: close\r\n"
        if response.announcesLength { head += "Content-Length: \(response.body.count)\r\n" }
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        let bytes = Array(head.utf8) + response.body
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            sent += n
        }
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 302: return "Found"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        default: return status >= 500 ? "Server Error" : "Status"
        }
    }
}

/// `application/x-www-form-urlencoded` decoding (`+` is a space) and encoding.
enum FormCoding {
    static func decode(_ text: String) -> [(String, String)] {
        text.split(separator: "&").map { pair in
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (unescape(kv[0]), kv.count > 1 ? unescape(kv[1]) : "")
        }
    }

    private static func unescape(_ s: Substring) -> String {
        (s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding) ?? ""
    }
}
