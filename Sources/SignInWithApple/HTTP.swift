internal import Foundation
#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif
internal import WebAuthnCore

/// One HTTP exchange with Apple through URLSession (on Linux, libcurl over the
/// system OpenSSL): a timeout, and a cap on the response body that cancels the
/// transfer as soon as it is passed, so a hostile or broken endpoint cannot make
/// the server buffer without bound.
enum AppleHTTP {
    struct Response {
        let status: Int
        let body: [UInt8]
    }

    static func send(_ request: URLRequest, maxBytes: Int, timeout: TimeInterval) async throws(WebAuthnError) -> Response {
        var request = request
        request.timeoutInterval = timeout
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        let collector = CappedCollector(maxBytes: maxBytes)
        let session = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let result: Result<Response, WebAuthnError> = await withCheckedContinuation { continuation in
            let task = session.dataTask(with: request)
            collector.start(task, continuation)
            // URLSession's own timeouts restart on activity; this deadline bounds the whole exchange.
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout + 1) { [collector] in
                if collector.expire(after: timeout + 1) { task.cancel() }
            }
        }
        return try result.get()
    }

    /// Percent-encodes a form (application/x-www-form-urlencoded): everything but the
    /// RFC 3986 unreserved characters is encoded, so `+`, `&`, `=` and spaces survive.
    static func formBody(_ fields: [(String, String)]) -> Data {
        Data(fields.map { encode($0.0) + "=" + encode($0.1) }.joined(separator: "&").utf8)
    }

    static func encode(_ s: String) -> String {
        var out = ""
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 0x0F)])
            }
        }
        return out
    }
}

/// Collects one task's body up to a cap; resumes its continuation exactly once.
private final class CappedCollector: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let maxBytes: Int
    private let lock = NSLock()
    private var body: [UInt8] = []
    private var status = 0
    private var failure: WebAuthnError?
    private var continuation: CheckedContinuation<Result<AppleHTTP.Response, WebAuthnError>, Never>?

    init(maxBytes: Int) { self.maxBytes = maxBytes }

    func start(_ task: URLSessionDataTask, _ continuation: CheckedContinuation<Result<AppleHTTP.Response, WebAuthnError>, Never>) {
        lock.withLock { self.continuation = continuation }
        task.resume()
    }

    /// Marks the exchange as timed out unless it has finished; true when the task should be cancelled.
    func expire(after seconds: TimeInterval) -> Bool {
        lock.withLock {
            guard continuation != nil, failure == nil else { return false }
            failure = WebAuthnError(.appleEndpointUnavailable, "no complete answer within \(Int(seconds)) s")
            return true
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let tooLarge = lock.withLock { () -> Bool in
            status = (response as? HTTPURLResponse)?.statusCode ?? 0
            if response.expectedContentLength > Int64(maxBytes) {
                failure = WebAuthnError(.appleEndpointUnavailable, "the response announces \(response.expectedContentLength) bytes; the limit is \(maxBytes)")
                return true
            }
            return false
        }
        completionHandler(tooLarge ? .cancel : .allow)
    }

    /// Redirects are not followed: Apple's endpoints answer directly, and a redirect could
    /// carry the client secret elsewhere. The 3xx answer itself is then the response.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let cancel = lock.withLock { () -> Bool in
            guard failure == nil else { return true }
            guard data.count <= maxBytes - body.count else {
                failure = WebAuthnError(.appleEndpointUnavailable, "the response is over \(maxBytes) bytes")
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
            () -> (CheckedContinuation<Result<AppleHTTP.Response, WebAuthnError>, Never>?, Result<AppleHTTP.Response, WebAuthnError>) in
            let c = self.continuation
            self.continuation = nil
            if let failure { return (c, .failure(failure)) }
            if let error {
                return (c, .failure(WebAuthnError(.appleEndpointUnavailable, "\(task.originalRequest?.url?.path ?? "Apple"): \(error.localizedDescription)")))
            }
            return (c, .success(AppleHTTP.Response(status: status, body: body)))
        }
        continuation?.resume(returning: result)
    }
}
