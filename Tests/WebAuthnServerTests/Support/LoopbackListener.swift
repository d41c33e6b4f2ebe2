import Foundation
import WebAuthnCore
#if canImport(Glibc)
    import Glibc
#endif

/// A listening socket on 127.0.0.1 for the tests' own servers (``MetadataStandIn``,
/// ``ConnectProxy``): one thread accepts, one thread per connection runs the server's `serve`,
/// which closes the connection. Test code only.
final class LoopbackListener: @unchecked Sendable {
    let port: Int
    private let socket: Int32
    private let stopped = Locked(false)

    var isStopped: Bool { stopped.withLock { $0 } }

    struct ListenerError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Listens on a free port; nothing is accepted before ``start(_:)``.
    init() throws {
        // A client that gives up (a deadline) must not kill the test process with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ListenerError("socket() failed: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            close(fd)
            throw ListenerError("cannot listen on 127.0.0.1: \(errno)")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        socket = fd
    }

    /// Accepts connections, each served on a thread of its own, until ``stop()``.
    func start(_ serve: @escaping @Sendable (Int32) -> Void) {
        Thread { [self] in
            while !isStopped {
                let connection = accept(socket, nil, nil)
                if connection < 0 {
                    if isStopped { return }
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return
                }
                Thread { serve(connection) }.start()
            }
        }.start()
    }

    /// Stops accepting; connections being served finish.
    func stop() {
        let first = stopped.withLock { s -> Bool in
            defer { s = true }
            return !s
        }
        guard first else { return }
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
    }

    deinit { stop() }
}
