import Foundation
import Hummingbird
import WebAuthnCore

/// JSON in and out, and the FIDO conformance API's status envelope.
enum HTTP {
    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok, cookie: Cookie? = nil) -> Response {
        var response = Response(status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                                body: ResponseBody(byteBuffer: ByteBuffer(bytes: value.serializedBytes())))
        if let cookie { response.setCookie(cookie) }
        return response
    }

    /// `{"status":"ok","errorMessage":""}` plus the members of `payload`.
    static func ok(_ payload: JSONObject = JSONObject(), cookie: Cookie? = nil) -> Response {
        var object: JSONObject = ["status": "ok", "errorMessage": ""]
        for member in payload.members { object[member.key] = member.value }
        return json(.object(object), cookie: cookie)
    }

    /// `{"status":"failed","errorMessage":"<code>: <message>"}` with a 4xx status.
    static func failed(_ error: WebAuthnError, status: HTTPResponse.Status = .badRequest) -> Response {
        json(["status": "failed", "errorMessage": .string("\(error.code.rawValue): \(error.message)")], status: status)
    }

    /// The status a failure answers with.
    static func status(for error: WebAuthnError) -> HTTPResponse.Status {
        switch error.code {
        case .inputTooLarge: return .contentTooLarge
        case .storageFailure, .cryptoFailure: return .internalServerError
        case .signatureInvalid, .credentialNotOwnedByUser, .userHandleMismatch, .counterRegression: return .unauthorized
        default: return .badRequest
        }
    }

    /// Reads a bounded JSON body.
    static func body(_ request: Request, limit: Int) async throws(WebAuthnError) -> JSONValue {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch {
            throw WebAuthnError(.inputTooLarge, "the request body is larger than \(limit) bytes")
        }
        return try JSONValue.parse(Array(buffer.readableBytesView), limits: JSONLimits(maxBytes: limit, maxDepth: 32))
    }

    static func sessionCookie(_ id: String, secure: Bool) -> Cookie {
        Cookie(name: SessionStore.cookieName, value: id, maxAge: Int(SessionStore.lifetime), path: "/", secure: secure, httpOnly: true, sameSite: .strict)
    }
}
