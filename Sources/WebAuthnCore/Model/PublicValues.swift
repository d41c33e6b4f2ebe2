public import Foundation
public import _WebAuthnEncoding
package import _WebAuthnCrypto

/// An X.509 certificate, as an opaque value: a trust anchor you configure, or
/// a certificate an attestation presented. Parsed and kept by OpenSSL; only what
/// callers need (its DER, PEM, subject and validity) is public.
public struct Certificate: Sendable, Hashable, CustomStringConvertible {
    package let x509: X509Certificate

    package init(_ x509: X509Certificate) { self.x509 = x509 }

    /// Parses one DER certificate (at most 32 KiB).
    public init(der: [UInt8]) throws(WebAuthnError) { x509 = try X509Certificate(der: der) }

    /// Parses one PEM certificate (`-----BEGIN CERTIFICATE-----`).
    public init(pem: String) throws(WebAuthnError) { x509 = try X509Certificate(pem: pem) }

    /// The certificate's DER encoding.
    public var der: [UInt8] { x509.der }
    /// The certificate in PEM.
    public var pem: String { x509.pem }
    /// The subject, as `CN=..., O=...`.
    public var subject: String { x509.subjectSummary }
    /// The start of the validity period.
    public var notBefore: Date? { x509.notBefore }
    /// The end of the validity period.
    public var notAfter: Date? { x509.notAfter }
    /// SHA-256 of the DER, in hex.
    public var fingerprint: String { x509.fingerprint }
    /// The subject.
    public var description: String { subject }

    /// Certificates are equal when their DER encodings are.
    public static func == (a: Certificate, b: Certificate) -> Bool { a.x509.der == b.x509.der }
    /// Hashes the DER encoding.
    public func hash(into hasher: inout Hasher) { hasher.combine(x509.der) }
}

/// A certificate revocation list (DER or PEM), as an opaque value for ``TrustAnchors``.
public struct RevocationList: Sendable {
    package let crl: CertificateRevocationList

    package init(_ crl: CertificateRevocationList) { self.crl = crl }

    /// Parses a CRL in DER or PEM.
    public init(derOrPEM bytes: [UInt8]) throws(WebAuthnError) { crl = try CertificateRevocationList(derOrPEM: bytes) }
}

/// WebAuthn extension inputs (in options) or client extension outputs (in a
/// response): a JSON object, kept as the client sent it or as you wrote it.
public struct ClientExtensions: Sendable, Equatable, CustomStringConvertible {
    package var object: JSONObject

    package init(_ object: JSONObject) { self.object = object }

    /// No extensions.
    public init() { object = JSONObject() }

    /// Parses a JSON object such as `{"credProps": true}`.
    public init(json: String) throws(WebAuthnError) {
        guard case .object(let o) = try JSONValue.parse(json, limits: JSONLimits(maxBytes: 64 * 1024, maxDepth: 8)) else {
            throw WebAuthnError(.jsonMalformed, "extensions must be a JSON object")
        }
        object = o
    }

    /// The extension identifiers present, in order.
    public var identifiers: [String] { object.keys }
    /// Whether the extension is present.
    public func contains(_ identifier: String) -> Bool { object[identifier] != nil }
    /// The value of a boolean extension (such as `credProps.rk` through ``json(_:)``), nil when absent or not a boolean.
    public func bool(_ identifier: String) -> Bool? { object[identifier]?.boolValue }
    /// The JSON text of one extension's value, nil when absent.
    public func json(_ identifier: String) -> String? { object[identifier]?.serialized() }
    /// The whole object as JSON text.
    public var json: String { JSONValue.object(object).serialized() }
    /// Whether there are no extensions.
    public var isEmpty: Bool { object.keys.isEmpty }
    /// The JSON text (``json``).
    public var description: String { json }

    /// Extensions are equal when their JSON texts are (member order counts).
    public static func == (a: ClientExtensions, b: ClientExtensions) -> Bool { a.json == b.json }
}
