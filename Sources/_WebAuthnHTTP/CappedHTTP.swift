package import Foundation
#if canImport(FoundationNetworking)
    package import FoundationNetworking
#endif
package import _WebAuthnEncoding
package import _WebAuthnCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP/1.1 exchange (``HTTP1Exchange``: a socket of its own, TLS through the system's
/// OpenSSL against the system's roots): an idle timeout, a deadline on the whole exchange, and
/// a cap on the response body past which nothing is read, so a hostile or broken endpoint can
/// make the server neither buffer without bound nor wait for ever. Compressed bodies are refused.
/// Every failure is a `WebAuthnError` with the caller's code (`apple_endpoint_unavailable`,
/// `metadata_unavailable`).
package enum CappedHTTP {
    /// A complete answer: its status, its headers (names lowercased) and its whole body.
    package struct Response: Sendable {
        package let status: Int
        package let headers: [String: String]
        package let body: [UInt8]

        package init(status: Int, headers: [String: String] = [:], body: [UInt8]) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        /// A header by name, in any case.
        package func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    /// Which redirects are followed.
    package enum Redirects: Sendable {
        /// None: the 3xx answer is the response (an endpoint that answers directly, and a
        /// redirect that could carry a secret elsewhere).
        case refuse
        /// To `https` URLs only (signed content, such as a metadata BLOB), at most five, and once a
        /// public address has answered, only to public addresses (not loopback, private or link-local).
        case httpsOnly
    }

    /// Whether `url` may be fetched: `https`, or `http` to a loopback address (a local stand-in),
    /// with a host and no user or password in it.
    package static func isFetchable(_ url: URL) -> Bool {
        let scheme = url.scheme?.lowercased()
        let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(url.host?.lowercased() ?? "")
        return (scheme == "https" || (scheme == "http" && loopback)) && url.host != nil && url.user == nil && url.password == nil
    }

    /// Sends `request` and collects the answer, on a thread of its own (``HTTP1Exchange``: the
    /// waits are `poll`s, and nothing is read past the cap).
    ///
    /// - Parameters:
    ///   - maxBytes: the largest body accepted; a larger announced or received body fails.
    ///   - timeout: the most time without progress (a byte sent or received).
    ///   - deadline: the most the whole exchange may take; default `timeout + 1` seconds.
    ///   - redirects: which redirects to follow. Default none.
    ///   - roots: the roots to trust instead of the system's (tests' stand-ins); nil: the system's.
    ///   - proxy: the proxy `https` fetches go through; default the environment's (``environmentProxy``).
    ///   - failure: the code of every failure (unreachable, timed out, too large, truncated).
    package static func send(
        _ request: URLRequest, maxBytes: Int, timeout: TimeInterval, deadline: TimeInterval? = nil, redirects: Redirects = .refuse,
        roots: [X509Certificate]? = nil, proxy: Result<Proxy?, WebAuthnError> = environmentProxy, failure: WebAuthnError.Code
    ) async throws(WebAuthnError) -> Response {
        let through: Proxy?
        switch proxy {
        case .success(let value): through = value
        case .failure(let error): throw WebAuthnError(failure, error.message)
        }
        let limit = deadline ?? timeout + 1
        let cancellation = Cancellation()
        let exchange = HTTP1Exchange(
            maxBytes: maxBytes, idle: timeout, deadline: .now + .milliseconds(Int64(limit * 1000)), limit: limit, redirects: redirects, code: failure,
            roots: roots, proxy: through,
            cancelled: cancellation)
        let result: Result<Response, WebAuthnError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                guard cancellation.start(continuation) else { return }
                // The caller is answered at the deadline even if the exchange's thread is held
                // where no wait of its own can end it (a name lookup).
                DispatchQueue.global().asyncAfter(deadline: .now() + limit + 0.05) {
                    cancellation.cancel(WebAuthnError(failure, "no complete answer within \(limit) s"))
                }
                Thread {
                    let result: Result<Response, WebAuthnError>
                    do throws(WebAuthnError) { result = .success(try exchange.run(request)) } catch { result = .failure(error) }
                    cancellation.finish(result)
                }.start()
            }
        } onCancel: {
            cancellation.cancel(WebAuthnError(failure, "the exchange was cancelled"))
        }
        return try result.get()
    }

    /// An exchange's one answer to its caller, and its cancellation: the caller is answered at
    /// once, and the socket the exchange waits on is shut down, which ends its wait.
    final class Cancellation: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<Result<Response, WebAuthnError>, Never>?
        private var answered = false
        private var cancelled = false
        private var socket: Int32?

        var isCancelled: Bool { lock.withLock { cancelled } }

        /// Keeps the caller's continuation; false when cancelled already (answered at once).
        func start(_ continuation: CheckedContinuation<Result<Response, WebAuthnError>, Never>) -> Bool {
            let early = lock.withLock { () -> Bool in
                if cancelled { return true }
                self.continuation = continuation
                return false
            }
            if early { continuation.resume(returning: .failure(WebAuthnError(.internalError, "the exchange was cancelled"))) }
            return !early
        }

        func finish(_ result: Result<Response, WebAuthnError>) {
            let c = lock.withLock { () -> CheckedContinuation<Result<Response, WebAuthnError>, Never>? in
                guard !answered else { return nil }
                answered = true
                defer { continuation = nil }
                return continuation
            }
            c?.resume(returning: result)
        }

        func cancel(_ error: WebAuthnError) {
            let socket = lock.withLock { () -> Int32? in
                cancelled = true
                return self.socket
            }
            if let socket { _ = shutdown(socket, Int32(SHUT_RDWR)) }
            finish(.failure(error))
        }

        /// The socket the exchange waits on now.
        func watch(_ fd: Int32) {
            let cancelledAlready = lock.withLock { () -> Bool in
                socket = fd
                return cancelled
            }
            if cancelledAlready { _ = shutdown(fd, Int32(SHUT_RDWR)) }
        }

        func unwatch() { lock.withLock { socket = nil } }
    }
}
