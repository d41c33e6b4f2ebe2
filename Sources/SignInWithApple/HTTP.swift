internal import Foundation
#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif
internal import WebAuthnCore
internal import _WebAuthnHTTP

/// One HTTP exchange with Apple through the package's capped HTTP/1.1 client
/// (`CappedHTTP`, TLS through the system OpenSSL): a timeout, a deadline one
/// second past it, and a cap on the response body that cancels the transfer as soon as it
/// is passed, so a hostile or broken endpoint cannot make the server buffer without bound.
/// Redirects are not followed: Apple's endpoints answer directly, and a redirect could
/// carry the client secret elsewhere. The 3xx answer itself is then the response.
enum AppleHTTP {
    typealias Response = CappedHTTP.Response

    static func send(_ request: URLRequest, maxBytes: Int, timeout: TimeInterval) async throws(WebAuthnError) -> Response {
        try await CappedHTTP.send(request, maxBytes: maxBytes, timeout: timeout, redirects: .refuse, failure: .appleEndpointUnavailable)
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
