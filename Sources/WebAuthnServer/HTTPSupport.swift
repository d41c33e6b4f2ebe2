internal import Foundation
public import Hummingbird
internal import HTTPTypes
internal import NIOCore
public import WebAuthnCore
internal import WebAuthnMetadata
package import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// A `Set-Cookie` value: the cookie, then its attributes in a fixed order, `Max-Age`, `Path`,
/// `Secure` when asked, `HttpOnly`, `SameSite`. Hummingbird's `Cookie` built a dictionary of its
/// attributes for each response (and wrote them in that dictionary's order); a session cookie's
/// attributes are the same on every response, so they are formatted once (issue 13).
struct SetCookie: Sendable, Equatable {
    /// `SameSite`: `Strict` for sessions; the Apple web flow's cookie is `None` over HTTPS (Apple's
    /// form post is cross-site) and `Lax` otherwise.
    enum SameSite: String, Sendable { case strict = "Strict", lax = "Lax", none = "None" }

    /// What follows the value: `; Max-Age=…; Path=/…`.
    struct Attributes: Sendable, Equatable {
        let text: String
        init(maxAge: Int, secure: Bool, sameSite: SameSite) {
            text = "; Max-Age=\(maxAge); Path=/" + (secure ? "; Secure" : "") + "; HttpOnly; SameSite=\(sameSite.rawValue)"
        }
    }

    /// The field's value.
    let value: String

    /// `name` and `value` are cookie tokens (RFC 6265 §4.1.1): this server's own names and base64url values.
    init(name: String, value: String, _ attributes: Attributes) {
        self.value = name + "=" + value + attributes.text
    }
}

extension Response {
    mutating func setCookie(_ cookie: SetCookie) { headers[values: .setCookie].append(cookie.value) }
}

/// JSON in and out, and the FIDO conformance API's status envelope.
enum HTTP {
    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok, cookie: SetCookie? = nil) -> Response {
        var response = Response(
            status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: value.serializedBytes())))
        if let cookie { response.setCookie(cookie) }
        return response
    }

    /// The value of the request's first cookie named `name` (as Hummingbird's `request.cookies`
    /// reads it: `Cookie` fields split at `;`, leading whitespace dropped), without parsing the others.
    static func cookie(_ name: String, in request: Request) -> Substring? {
        let key = name.utf8
        for field in request.headers[values: .cookie] {
            for pair in field.utf8.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: false) {
                let trimmed = pair.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
                guard trimmed.starts(with: key) else { continue }
                let rest = trimmed.dropFirst(key.count)
                guard rest.first == UInt8(ascii: "=") else { continue }
                return Substring(rest.dropFirst())
            }
        }
        return nil
    }

    /// `{"status":"ok","errorMessage":""}` plus the members of `payload`.
    static func ok(_ payload: JSONObject = JSONObject(), cookie: SetCookie? = nil) -> Response {
        var object: JSONObject = ["status": "ok", "errorMessage": ""]
        for member in payload.members { object[member.key] = member.value }
        return json(.object(object), cookie: cookie)
    }

    /// `{"status":"failed","errorMessage":"<code>: <message>"}` with a 4xx status.
    static func failed(_ error: WebAuthnError, status: HTTPResponse.Status = .badRequest, extra: JSONObject = JSONObject()) -> Response {
        var object = failure(error)
        for member in extra.members { object[member.key] = member.value }
        return json(.object(object), status: status)
    }

    /// The body of a failure: `{"status":"failed","errorMessage":"<code>: <message>"}`.
    static func failure(_ error: WebAuthnError) -> JSONObject {
        ["status": "failed", "errorMessage": .string("\(error.code.rawValue): \(error.message)")]
    }

    /// The status a failure answers with.
    static func status(for error: WebAuthnError) -> HTTPResponse.Status {
        HTTPResponse.Status(code: error.httpStatus)  // the engine's public mapping (`WebAuthnError.httpStatus`)
    }

    /// Ceremony bodies are `application/json` only: a cross-site form can
    /// post only `text/plain`, form or multipart bodies without a preflight.
    static func requireJSON(_ request: Request) throws(WebAuthnError) {
        guard let header = request.headers[.contentType], isJSON(header) else {
            throw WebAuthnError(.contentTypeUnsupported, "the body must be sent as Content-Type: application/json")
        }
    }

    /// Whether a Content-Type is `application/json`, in any case, with any parameters and
    /// surrounding spaces or tabs (compared as bytes: no Foundation string work per request).
    static func isJSON(_ header: String) -> Bool {
        let expected = Array("application/json".utf8)
        var type = Array(header.utf8.prefix { $0 != UInt8(ascii: ";") })
        while let last = type.last, last == 0x20 || last == 0x09 { type.removeLast() }
        let start = type.firstIndex { $0 != 0x20 && $0 != 0x09 } ?? type.endIndex
        let trimmed = type[start...]
        guard trimmed.count == expected.count else { return false }
        // ASCII letters fold to lower case; "application/json" has no other bytes that fold.
        return zip(trimmed, expected).allSatisfy { (($0 >= 0x41 && $0 <= 0x5A) ? $0 | 0x20 : $0) == $1 }
    }

    /// Parses an `application/x-www-form-urlencoded` body (at most 32 fields; `+` is a
    /// space; a name given twice is refused, like a duplicate JSON member).
    static func form(_ bytes: [UInt8]) throws(WebAuthnError) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            guard fields.count < 32 else { throw WebAuthnError(.requestMalformed, "the form has more than 32 fields") }
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ raw: ArraySlice<UInt8>) throws(WebAuthnError) -> String {
                let plus: UInt8 = 0x2B, space: UInt8 = 0x20
                var bytes: [UInt8] = []
                bytes.reserveCapacity(raw.count)
                for byte in raw { bytes.append(byte == plus ? space : byte) }
                let text = String(decoding: bytes, as: UTF8.self)
                guard let decoded = text.removingPercentEncoding else { throw WebAuthnError(.requestMalformed, "a form field is not percent-encoded UTF-8") }
                return decoded
            }
            let name = try decode(parts[0])
            let value = parts.count > 1 ? try decode(parts[1]) : ""
            guard fields.updateValue(value, forKey: name) == nil else { throw WebAuthnError(.requestMalformed, "the form names \(name.prefix(32)) twice") }
        }
        return fields
    }

    /// The request's `Content-Length`, when it is a number; one larger than `Int` holds reads as
    /// `Int.max` (over every limit). The connection's handler and the body reader judge it alike.
    static func declaredLength(_ fields: HTTPFields) -> Int? {
        guard let text = fields[.contentLength], !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int(text) ?? .max
    }

    /// The request's body, at most `limit` bytes: `input_too_large` past it, `request_malformed`
    /// when it cannot be read (a malformed chunked encoding, a connection closed mid-body: red
    /// team, thirteenth pass, these answered 413 too).
    static func collect(_ request: Request, limit: Int) async throws(WebAuthnError) -> ByteBuffer {
        do {
            return try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw WebAuthnError(.inputTooLarge, "the request body is larger than \(limit) bytes")
        } catch {
            throw WebAuthnError(.requestMalformed, "the request body could not be read (its chunked encoding is malformed, or it was cut short)")
        }
    }

    /// Reads the body of a request whose route has no use for one (at most 1 KiB, and dropped): a
    /// route that changes something acts only on a request it could read to its end. Before, a
    /// `DELETE /demo/account` whose chunked body was malformed, or that declared a 1 GB body,
    /// deleted the account and answered 200, where any route reading its body answered 400 or
    /// 413 (red team, round 26).
    static func requireReadable(_ request: Request) async throws(WebAuthnError) {
        _ = try await bytes(request, limit: 1024)
    }

    /// Reads a bounded JSON body; an empty one is `empty` when given (else malformed).
    static func body(_ request: Request, limit: Int, whenEmpty empty: JSONValue? = nil) async throws(WebAuthnError) -> JSONValue {
        let buffer = try await bytes(request, limit: limit)
        if let empty, buffer.readableBytes == 0 { return empty }
        return try JSONValue.parse(Array(buffer.readableBytesView), limits: JSONLimits(maxBytes: limit, maxDepth: 32))
    }

    /// The body's bytes, at most `limit`.
    static func bytes(_ request: Request, limit: Int) async throws(WebAuthnError) -> ByteBuffer {
        // A declared length over the limit is refused before any of the body is read. (A client
        // that sent `Expect: 100-continue` was invited to send it only if the length is within the
        // server-wide limit: a route with a smaller one refuses it after the invitation.)
        if let length = declaredLength(request.headers), length > limit {
            throw WebAuthnError(.inputTooLarge, "the request body is larger than \(limit) bytes")
        }
        return try await collect(request, limit: limit)
    }
}

/// The members of a JSON request body other than a credential: the body is an object, and a
/// member that is present (not `null`) has its type, or the request is `request_malformed`.
/// (Red team, round 26: `{"username": 5}` asked for usernameless options, and a body of `[1,2]`
/// or a non-object `extensions` was read as if absent.)
struct RequestMembers {
    let object: JSONObject

    init(_ body: JSONValue) throws(WebAuthnError) {
        guard let object = body.objectValue else { throw WebAuthnError(.requestMalformed, "the body is not a JSON object") }
        self.object = object
    }

    private func member<T>(_ name: String, _ type: String, _ read: (JSONValue) -> T?) throws(WebAuthnError) -> T? {
        guard let value = object[name], value != .null else { return nil }
        guard let typed = read(value) else { throw WebAuthnError(.requestMalformed, "\(name) is not \(type)") }
        return typed
    }

    func string(_ name: String) throws(WebAuthnError) -> String? { try member(name, "a string", \.stringValue) }
    func object(_ name: String) throws(WebAuthnError) -> JSONObject? { try member(name, "an object", \.objectValue) }
    func array(_ name: String) throws(WebAuthnError) -> [JSONValue]? { try member(name, "an array", \.arrayValue) }
    func bool(_ name: String) throws(WebAuthnError) -> Bool? { try member(name, "true or false", \.boolValue) }

    /// An array of strings (`hints`, `attestationFormats`): an element of another type is refused
    /// as the browser's conversion to `sequence<DOMString>` would refuse it; unknown strings are
    /// the caller's to ignore.
    func strings(_ name: String) throws(WebAuthnError) -> [String]? {
        guard let elements = try array(name) else { return nil }
        var strings: [String] = []
        for element in elements {
            guard let string = element.stringValue else { throw WebAuthnError(.requestMalformed, "\(name) holds a value that is not a string") }
            strings.append(string)
        }
        return strings
    }
}

/// Security headers on every answer: no sniffing, no referrer, no framing,
/// a Content-Security-Policy without inline script, and HSTS over HTTPS.
/// The page's policy allows its own script and style files only.
struct SecurityHeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    let secure: Bool
    /// Around routes that have their own (the application's router): a response that already
    /// carries a `Content-Security-Policy` got its headers from the routes' middleware.
    var outer = false
    /// The application's routes: a request none of them took is answered `404 not_found` or
    /// `405 method_not_allowed` in the failure envelope (``RouteTable/answer(to:)``).
    var routes: RouteTable?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound && routes != nil {
            response = routes!.answer(to: request)
        } catch let error as any HTTPResponseError {
            // Not found, method not allowed, ...: the same headers.
            response = try error.response(from: request, context: context)
        }
        if outer, response.headers[.contentSecurityPolicy] != nil { return response }
        SecurityHeaders.apply(to: &response.headers, secure: secure)
        return response
    }
}

/// Each route at one spelling: a path with an empty segment (`//metrics`, `/metrics/`) is not
/// found, where Hummingbird's router skipped empty segments and served the route. A proxy's rule
/// on the exact path (`/metrics`, say) then covers every way to reach it (red team, eighteenth
/// pass: `/metrics/`, `//metrics` and `http://h//metrics/` were served).
struct CanonicalPathMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Self.isCanonical(request.uri.path) else { throw HTTPError(.notFound) }
        return try await next(request, context)
    }

    /// The root, or a path none of whose segments is empty: no `//`, no `/` at the end. Read byte
    /// by byte: Foundation's `contains` bridged every request's path (a server profile, issue 13).
    static func isCanonical(_ path: String) -> Bool {
        if path == "/" { return true }
        var previous: UInt8 = 0
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/") && previous == UInt8(ascii: "/") { return false }
            previous = byte
        }
        return previous != UInt8(ascii: "/")
    }
}

/// The headers every response carries, built once: appended when the response sets none of
/// them (every route here), set one by one otherwise.
enum SecurityHeaders {
    static let pagePolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    static let apiPolicy = "default-src 'none'; frame-ancestors 'none'"

    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let frameOptions = HTTPField.Name("X-Frame-Options")!
    static let openerPolicy = HTTPField.Name("Cross-Origin-Opener-Policy")!

    /// The fields for an HTML page or anything else, with or without HSTS.
    static func fields(html: Bool, secure: Bool) -> [HTTPField] {
        var fields = [
            HTTPField(name: .contentSecurityPolicy, value: html ? pagePolicy : apiPolicy),
            HTTPField(name: .xContentTypeOptions, value: "nosniff"),
            HTTPField(name: referrerPolicy, value: "no-referrer"),
            HTTPField(name: frameOptions, value: "DENY"),
            HTTPField(name: openerPolicy, value: "same-origin"),
        ]
        if secure { fields.append(HTTPField(name: .strictTransportSecurity, value: "max-age=31536000")) }
        return fields
    }

    static let api = fields(html: false, secure: false)
    static let apiSecure = fields(html: false, secure: true)
    static let page = fields(html: true, secure: false)
    static let pageSecure = fields(html: true, secure: true)
    static let noStore = HTTPField(name: .cacheControl, value: "no-store")
    static let names: Set<HTTPField.Name> = Set(apiSecure.map(\.name))

    /// Sets the security headers (replacing any the response set) and `Cache-Control: no-store`
    /// unless the response has its own.
    static func apply(to headers: inout HTTPFields, secure: Bool) {
        var html = false, cacheControl = false, managed = false
        for field in headers {
            switch field.name {
            case .contentType: html = html || field.value.hasPrefix("text/html")
            case .cacheControl: cacheControl = true
            default: if names.contains(field.name) { managed = true }
            }
        }
        let chosen = html ? (secure ? pageSecure : page) : (secure ? apiSecure : api)
        if managed {
            for field in chosen { headers[field.name] = field.value }
        } else {
            headers.append(contentsOf: chosen)
        }
        if !cacheControl { headers.append(noStore) }
    }
}

/// A `WebAuthnError` thrown in a host app's own route (``WebAuthnRoutes/requireRecentVerification(_:)``
/// in a handler of its own) answers as the ceremony routes answer it: its status
/// (`401 sign_in_required`, `401 reauthentication_required`, ...) and the failure envelope. It
/// answered `500` with an empty body (an adopter's review). The server's own failures keep their
/// detail out of the answer.
extension WebAuthnError: HTTPResponseError {
    /// The status the ceremony routes answer this error with.
    public var status: HTTPResponse.Status { HTTP.status(for: self) }

    /// `{"status":"failed","errorMessage":"<code>: <message>"}`; the server's own failures say only that it failed.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        switch code {
        case .storageFailure, .cryptoFailure, .internalError, .configurationInvalid:
            return HTTP.failed(WebAuthnError(.internalError, "the server failed; quote request id \(context.id)"), status: .internalServerError)
        default:
            return HTTP.failed(self, status: status)
        }
    }
}
