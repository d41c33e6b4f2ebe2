import Foundation
import WebAuthnCore
#if canImport(Glibc)
    import Glibc
#endif

/// A reverse proxy on 127.0.0.1 that ends each client connection after `limit` answers, the last
/// of them sent with `Connection: close`, as nginx does at its `keepalive_requests`. One request
/// at a time per connection, each with a `Content-Length` body or none. Test code only.
final class KeepAliveLimitProxy: @unchecked Sendable {
    var port: Int { listener.port }
    private let listener: LoopbackListener
    private let upstreamPort: Int
    private let limit: Int
    private let closed = Locked(0)

    /// Connections this proxy ended at its limit.
    var connectionsClosed: Int { closed.withLock { $0 } }

    init(upstreamPort: Int, limit: Int) throws {
        self.upstreamPort = upstreamPort
        self.limit = limit
        listener = try LoopbackListener()
        listener.start { [self] connection in relay(connection) }
    }

    func stop() { listener.stop() }

    private func relay(_ client: Int32) {
        defer { close(client) }
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(upstream) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(upstreamPort).bigEndian
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return }
        for answered in 1...limit {
            guard let request = Self.message(from: client), Self.send(request, to: upstream), var answer = Self.message(from: upstream) else { return }
            if answered == limit, let end = Self.headEnd(answer) {
                answer.insert(contentsOf: Array("Connection: close\r\n".utf8), at: end - 2)
            }
            guard Self.send(answer, to: client) else { return }
        }
        closed.withLock { $0 += 1 }
    }

    /// Where a message's head ends (after its blank line), if it has one.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count where bytes[(i - 3)...i].elementsEqual([13, 10, 13, 10]) { return i + 1 }
        return nil
    }

    /// One HTTP/1.1 message: its head, read byte by byte, and its `Content-Length` body.
    private static func message(from fd: Int32) -> [UInt8]? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while !bytes.suffix(4).elementsEqual([13, 10, 13, 10]) {
            guard bytes.count < 64 * 1024, recv(fd, &byte, 1, 0) == 1 else { return nil }
            bytes.append(byte)
        }
        let length =
            String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
            .first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        var body = [UInt8](repeating: 0, count: length)
        var read = 0
        while read < length {
            let n = body.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + read, length - read, 0) }
            guard n > 0 else { return nil }
            read += n
        }
        return bytes + body
    }

    private static func send(_ bytes: [UInt8], to fd: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
