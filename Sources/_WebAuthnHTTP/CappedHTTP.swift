package import Foundation
#if canImport(FoundationNetworking)
    package import FoundationNetworking
#endif
package import _WebAuthnEncoding

/// One HTTP exchange through URLSession (on Linux, libcurl over the system OpenSSL): the
/// transport's idle timeout, a deadline on the whole exchange, and a cap on the response
/// body that cancels the transfer as soon as it is passed, so a hostile or broken endpoint
/// can make the server neither buffer without bound nor wait for ever. Every failure is a
/// `WebAuthnError` with the caller's code (`apple_endpoint_unavailable`, `metadata_unavailable`).
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
        /// To `https` URLs only (signed content, such as a metadata BLOB).
        case httpsOnly
    }

    /// Whether `url` may be fetched: `https`, or `http` to a loopback address (a local stand-in),
    /// with a host and no user or password in it.
    package static func isFetchable(_ url: URL) -> Bool {
        let scheme = url.scheme?.lowercased()
        let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(url.host?.lowercased() ?? "")
        return (scheme == "https" || (scheme == "http" && loopback)) && url.host != nil && url.user == nil && url.password == nil
    }

    /// Sends `request` and collects the answer.
    ///
    /// - Parameters:
    ///   - maxBytes: the largest body accepted; a larger announced or received body fails.
    ///   - timeout: URLSession's request timeout (it restarts on activity).
    ///   - deadline: the most the whole exchange may take; default `timeout + 1` seconds.
    ///   - redirects: which redirects to follow. Default none.
    ///   - failure: the code of every failure (unreachable, timed out, too large, truncated).
    package static func send(
        _ request: URLRequest, maxBytes: Int, timeout: TimeInterval, deadline: TimeInterval? = nil, redirects: Redirects = .refuse,
        failure: WebAuthnError.Code
    ) async throws(WebAuthnError) -> Response {
        var request = request
        request.timeoutInterval = timeout
        // libcurl would offer gzip, deflate, br and zstd and inflate whatever came back before the
        // cap saw it (red team: 2 MB of gzip from a hostile endpoint held 2.2 GB). Ask for the body
        // as it is; a compressed one is refused when its head arrives (the collector).
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = deadline ?? timeout + 1
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let limit = deadline ?? timeout + 1
        let collector = CappedCollector(maxBytes: maxBytes, redirects: redirects, code: failure, what: request.url?.host ?? "the endpoint")
        let session = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: request)
        let result: Result<Response, WebAuthnError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                collector.start(task, continuation)
                // URLSession's own timeouts restart on activity; this deadline bounds the whole exchange.
                DispatchQueue.global().asyncAfter(deadline: .now() + limit) { [collector] in
                    if collector.fail(WebAuthnError(failure, "no complete answer within \(limit) s")) { task.cancel() }
                }
            }
        } onCancel: {
            if collector.fail(WebAuthnError(failure, "the exchange was cancelled")) { task.cancel() }
        }
        return try result.get()
    }
}

/// Collects one task's body up to a cap; resumes its continuation exactly once.
private final class CappedCollector: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let maxBytes: Int
    private let redirects: CappedHTTP.Redirects
    private let code: WebAuthnError.Code
    private let what: String
    private let lock = NSLock()
    private var body: [UInt8] = []
    private var status = 0
    private var headers: [String: String] = [:]
    private var expected: Int64 = -1
    private var failure: WebAuthnError?
    private var finished = false
    private var continuation: CheckedContinuation<Result<CappedHTTP.Response, WebAuthnError>, Never>?

    init(maxBytes: Int, redirects: CappedHTTP.Redirects, code: WebAuthnError.Code, what: String) {
        self.maxBytes = maxBytes
        self.redirects = redirects
        self.code = code
        self.what = what
    }

    func start(_ task: URLSessionDataTask, _ continuation: CheckedContinuation<Result<CappedHTTP.Response, WebAuthnError>, Never>) {
        let early = lock.withLock { () -> WebAuthnError? in
            // Cancelled (or past the deadline) before it began: answer at once.
            if let failure { return failure }
            self.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: .failure(early)) } else { task.resume() }
    }

    /// Fails the exchange unless it has finished, answering the caller at once (not when
    /// URLSession gets round to completing the cancelled task, which under load took seconds);
    /// true when the task should be cancelled.
    func fail(_ error: WebAuthnError) -> Bool {
        let taken = lock.withLock { () -> (failed: Bool, continuation: CheckedContinuation<Result<CappedHTTP.Response, WebAuthnError>, Never>?) in
            guard !finished, failure == nil else { return (false, nil) }
            failure = error
            let c = continuation
            continuation = nil
            return (true, c)
        }
        taken.continuation?.resume(returning: .failure(error))
        return taken.failed
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let tooLarge = lock.withLock { () -> Bool in
            let http = response as? HTTPURLResponse
            status = http?.statusCode ?? 0
            var collected: [String: String] = [:]
            for (name, value) in http?.allHeaderFields ?? [:] {
                guard let name = name as? String, let value = value as? String, collected.count < 64 else { continue }
                collected[name.lowercased()] = String(value.prefix(1024))
            }
            headers = collected
            expected = response.expectedContentLength
            // Refused before any of the body is read: libcurl inflates a compressed body ahead of
            // the delegate, so the cap below would count bytes already decoded into memory.
            if let encoding = collected["content-encoding"], encoding.trimmingCharacters(in: .whitespaces).lowercased() != "identity" {
                failure = failure ?? WebAuthnError(code, "\(what) sent a compressed body (Content-Encoding \(encoding.prefix(32))); only identity is accepted")
                return true
            }
            if response.expectedContentLength > Int64(maxBytes) {
                failure = failure ?? WebAuthnError(code, "\(what) announces \(response.expectedContentLength) bytes; the limit is \(maxBytes)")
                return true
            }
            return false
        }
        completionHandler(tooLarge ? .cancel : .allow)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        switch redirects {
        case .refuse: completionHandler(nil)
        case .httpsOnly: completionHandler(request.url?.scheme?.lowercased() == "https" ? request : nil)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let cancel = lock.withLock { () -> Bool in
            guard failure == nil else { return true }
            guard data.count <= maxBytes - body.count else {
                failure = WebAuthnError(code, "\(what) sent over \(maxBytes) bytes")
                body = []
                return true
            }
            body.append(contentsOf: data)
            return false
        }
        if cancel { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let (continuation, result) = lock.withLock {
            () -> (CheckedContinuation<Result<CappedHTTP.Response, WebAuthnError>, Never>?, Result<CappedHTTP.Response, WebAuthnError>) in
            let c = self.continuation
            self.continuation = nil
            finished = true
            if let failure { return (c, .failure(failure)) }
            if let error { return (c, .failure(WebAuthnError(code, "\(what): \(error.localizedDescription)"))) }
            // A body shorter than its Content-Length is a broken transfer, whatever the transport said
            // (a compressed body was refused with its head).
            if expected >= 0, Int64(body.count) != expected, status != 304, status != 204 {
                return (c, .failure(WebAuthnError(code, "\(what) announced \(expected) bytes and sent \(body.count)")))
            }
            return (c, .success(CappedHTTP.Response(status: status, headers: headers, body: body)))
        }
        continuation?.resume(returning: result)
    }
}
