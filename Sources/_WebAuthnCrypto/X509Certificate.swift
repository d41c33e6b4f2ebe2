internal import COpenSSL
package import Foundation
package import _WebAuthnEncoding

/// An owned, parsed X.509 certificate (OpenSSL `X509`).
package final class X509Certificate: @unchecked Sendable {
    /// Owned `X509 *`.
    package let x509: OpaquePointer
    /// The DER encoding the certificate was parsed from.
    package let der: [UInt8]

    /// The largest certificate the engine will parse.
    package static let maxSize = 32 * 1024

    /// Parses one DER certificate; trailing bytes are an error.
    package init(der: [UInt8]) throws(WebAuthnError) {
        guard !der.isEmpty, der.count <= Self.maxSize else {
            throw WebAuthnError(.attestationCertificateInvalid, "certificate size \(der.count) is outside 1...\(Self.maxSize) bytes")
        }
        var consumed = 0
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var p: UnsafePointer<UInt8>? = buffer.baseAddress
            let x = d2i_X509(nil, &p, buffer.count)
            if let p, let base = buffer.baseAddress { consumed = p - base }
            return x
        }
        guard let parsed else {
            let detail = OpenSSL.drainErrors()
            throw WebAuthnError(.attestationCertificateInvalid, "certificate is not valid DER X.509 (\(detail))")
        }
        guard consumed == der.count else {
            X509_free(parsed)
            throw WebAuthnError(.attestationCertificateInvalid, "\(der.count - consumed) trailing bytes after the certificate")
        }
        self.x509 = parsed
        self.der = der
    }

    /// Takes ownership of an `X509 *` (already up-referenced by the caller).
    package init(taking x509: OpaquePointer) {
        self.x509 = x509
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_X509(x509, &out)
        if n > 0, let out {
            der = Array(UnsafeBufferPointer(start: out, count: Int(n)))
            webauthn_openssl_free(out)
        } else {
            der = []
        }
    }

    /// Parses PEM text holding one certificate.
    package convenience init(pem: String) throws(WebAuthnError) {
        guard let der = PEM.body(pem) else {
            throw WebAuthnError(.attestationCertificateInvalid, "PEM certificate body is not base64")
        }
        try self.init(der: der)
    }

    /// The certificate as PEM text.
    package var pem: String { PEM.text(der, label: "CERTIFICATE") }

    deinit { X509_free(x509) }

    /// The X.509 version as written in certificates (1, 2 or 3); 0 when the
    /// encoded version is none of these (never an overflow on a huge INTEGER).
    package var version: Int {
        let encoded = X509_get_version(x509)  // 0, 1 or 2 for v1, v2, v3
        return (0...2).contains(encoded) ? Int(encoded) + 1 : 0
    }

    /// The subject's attributes in order, as (short name, value), e.g. ("CN", "…").
    package var subject: [(name: String, value: String)] { Self.entries(of: X509_get_subject_name(x509)) }
    /// The issuer's attributes in order.
    package var issuer: [(name: String, value: String)] { Self.entries(of: X509_get_issuer_name(x509)) }

    /// A one-line rendering of the subject, for messages: each value escaped as RFC 4514 says
    /// (`,` `+` `"` `\\` `<` `>` `;` `=` after a backslash, a leading `#` or space and a trailing
    /// space too, and control and format characters as `\\XX` UTF-8 bytes), so that one attribute
    /// cannot pass for several (red team, sixteenth pass: a CN of `Evil, O=Yubico AB, C=SE` read as
    /// a Yubico subject) and a bidirectional control cannot reorder what is shown.
    package var subjectSummary: String { Self.summary(of: X509_get_subject_name(x509)) }

    /// The issuer, rendered as ``subjectSummary``.
    package var issuerSummary: String { Self.summary(of: X509_get_issuer_name(x509)) }

    /// A name's attributes as `type=value`, the values escaped, the attributes of one
    /// multi-valued RDN joined by `+` and the RDNs by `, ` (RFC 4514's separators, in the
    /// certificate's order).
    private static func summary(of name: OpaquePointer?) -> String {
        guard let name else { return "" }
        var out = ""
        var lastSet: Int32 = -1
        for (i, attribute) in entries(of: name).enumerated() {
            let set = X509_NAME_get_entry(name, Int32(i)).map { X509_NAME_ENTRY_set($0) } ?? -1
            if i > 0 { out += set == lastSet ? "+" : ", " }
            lastSet = set
            out += "\(attribute.name)=\(escapedDNValue(attribute.value))"
        }
        return out
    }

    /// `value` escaped as an RFC 4514 attribute value.
    package static func escapedDNValue(_ value: String) -> String {
        var out = ""
        let scalars = Array(value.unicodeScalars)
        for (i, scalar) in scalars.enumerated() {
            let special = ",+\"\\<>;=".unicodeScalars.contains(scalar)
            let edge = (i == 0 && (scalar == "#" || scalar == " ")) || (i == scalars.count - 1 && scalar == " ")
            if special || edge {
                out += "\\" + String(Character(scalar))
            } else if scalar.isHiddenOrControl {
                out += String(Character(scalar)).utf8.map { "\\" + String(format: "%02X", $0) }.joined()
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// `object` in dotted-decimal form (`1.3.6.1.4.1.…`), or `OID` if OpenSSL cannot write it.
    private static func dottedOID(_ object: OpaquePointer?) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        let n = OBJ_obj2txt(&buffer, Int32(buffer.count), object, 1)
        guard n > 0, Int(n) < buffer.count else { return "OID" }
        return String(decoding: buffer.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func entries(of name: OpaquePointer?) -> [(name: String, value: String)] {
        guard let name else { return [] }
        var result: [(String, String)] = []
        for i in 0..<X509_NAME_entry_count(name) {
            guard let entry = X509_NAME_get_entry(name, i) else { continue }
            let object = X509_NAME_ENTRY_get_object(entry)
            let nid = OBJ_obj2nid(object)
            // A type OpenSSL has no name for is shown by its OID in dotted form (RFC 4514 §2.3);
            // it read `UNDEF` (red team, sixteenth pass).
            let short = nid == NID_undef ? dottedOID(object) : OBJ_nid2sn(nid).map { String(cString: $0) } ?? dottedOID(object)
            var utf8: UnsafeMutablePointer<UInt8>?
            let n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(entry))
            var value = ""
            if n >= 0, let utf8 {
                value = String(decoding: UnsafeBufferPointer(start: utf8, count: Int(n)), as: UTF8.self)
                webauthn_openssl_free(utf8)
            }
            result.append((short, value))
        }
        OpenSSL.clearErrors()
        return result
    }

    /// The values of a subject attribute ("C", "O", "OU", "CN", ...).
    package func subjectValues(_ shortName: String) -> [String] {
        subject.filter { $0.name == shortName }.map(\.value)
    }

    /// The basic constraints extension: nil if absent.
    /// Throws if it is present more than once or cannot be decoded.
    package func basicConstraints() throws(WebAuthnError) -> (isCA: Bool, critical: Bool)? {
        var critical: Int32 = 0
        let raw = X509_get_ext_d2i(x509, NID_basic_constraints, &critical, nil)
        defer { OpenSSL.clearErrors() }
        guard let raw else {
            if critical == -1 { return nil }
            throw WebAuthnError(.attestationCertificateInvalid, "basic constraints extension is repeated or malformed")
        }
        let bc = raw.assumingMemoryBound(to: BASIC_CONSTRAINTS.self)
        defer { BASIC_CONSTRAINTS_free(bc) }
        return (bc.pointee.ca != 0, critical == 1)
    }

    /// An extension by dotted OID: whether it is critical and its extnValue
    /// contents (the bytes inside the OCTET STRING). Nil if absent; throws if repeated.
    package func `extension`(oid: String) throws(WebAuthnError) -> (critical: Bool, value: [UInt8])? {
        guard let obj = OBJ_txt2obj(oid, 1) else { throw OpenSSL.failure("OBJ_txt2obj(\(oid))") }
        defer { ASN1_OBJECT_free(obj) }
        let index = X509_get_ext_by_OBJ(x509, obj, -1)
        guard index >= 0 else { return nil }
        guard X509_get_ext_by_OBJ(x509, obj, index) < 0 else {
            throw WebAuthnError(.attestationCertificateInvalid, "extension \(oid) appears more than once")
        }
        guard let ext = X509_get_ext(x509, index), let data = X509_EXTENSION_get_data(ext) else { return nil }
        let bytes = Array(UnsafeBufferPointer(start: ASN1_STRING_get0_data(data), count: Int(ASN1_STRING_length(data))))
        return (X509_EXTENSION_get_critical(ext) == 1, bytes)
    }

    /// The start of the validity period.
    package var notBefore: Date? { Self.date(X509_get0_notBefore(x509)) }
    /// The end of the validity period.
    package var notAfter: Date? { Self.date(X509_get0_notAfter(x509)) }

    private static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date? {
        guard let time else { return nil }
        var tm = tm()
        guard ASN1_TIME_to_tm(time, &tm) == 1 else { OpenSSL.clearErrors(); return nil }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&tm)))
    }

    /// Throws `certificate_expired` unless `date` lies within the validity period.
    package func checkValidity(at date: Date, role: String) throws(WebAuthnError) {
        guard let notBefore, let notAfter else {
            throw WebAuthnError(.attestationCertificateInvalid, "\(role) has an unreadable validity period")
        }
        let iso = ISO8601DateFormatter()
        guard date >= notBefore else {
            throw WebAuthnError(.certificateExpired, "\(role) is not valid before \(iso.string(from: notBefore)); the time is \(iso.string(from: date))")
        }
        guard date <= notAfter else {
            throw WebAuthnError(.certificateExpired, "\(role) expired at \(iso.string(from: notAfter)); the time is \(iso.string(from: date))")
        }
    }

    /// The certificate's subject public key.
    package func publicKey() throws(WebAuthnError) -> PublicKey {
        guard let borrowed = X509_get0_pubkey(x509) else {
            let detail = OpenSSL.drainErrors()
            throw WebAuthnError(.attestationCertificateInvalid, "certificate public key cannot be read (\(detail))")
        }
        // X509_get0_pubkey borrows; take our own reference before handing it to an owner.
        guard EVP_PKEY_up_ref(borrowed) == 1 else { throw OpenSSL.failure("EVP_PKEY_up_ref") }
        do {
            return try PublicKey(taking: borrowed)
        } catch {
            // A degenerate key keeps its own code (KeySanity); other refusals are the certificate's.
            if [.publicKeySmallOrder, .publicKeyPointInvalid, .publicKeyRSAInvalid].contains(error.code) {
                throw WebAuthnError(error.code, "certificate public key: \(error.message)")
            }
            throw WebAuthnError(.attestationCertificateInvalid, "certificate public key: \(error.message)")
        }
    }

    /// SHA-1 of the subjectPublicKey bit string, lowercase hex: the key
    /// identifier FIDO metadata uses for U2F attestation certificates.
    package var publicKeyIdentifier: String? {
        guard let bits = X509_get0_pubkey_bitstr(x509) else { return nil }
        let bytes = Array(UnsafeBufferPointer(start: ASN1_STRING_get0_data(bits), count: Int(ASN1_STRING_length(bits))))
        return Bytes.hex(Digest.hash(.sha1, bytes))
    }

    /// Whether the certificate is issued to `host` (subject alternative name
    /// dNSName, or the common name when there is none), per RFC 6125.
    package func matchesHost(_ host: String) -> Bool {
        defer { OpenSSL.clearErrors() }
        return X509_check_host(x509, host, host.utf8.count, 0, nil) == 1
    }

    /// Whether a subject alternative name dNSName is exactly `host` (any case): no wildcard, and
    /// never the common name. For signers that must be one named service (a metadata BLOB's).
    package func hasExactDNSName(_ host: String) -> Bool {
        defer { OpenSSL.clearErrors() }
        let flags = UInt32(X509_CHECK_FLAG_NO_WILDCARDS) | UInt32(X509_CHECK_FLAG_NEVER_CHECK_SUBJECT)
        return X509_check_host(x509, host, host.utf8.count, flags, nil) == 1
    }

    /// The SHA-256 fingerprint of the DER encoding, as lowercase hex.
    package var fingerprint: String { Bytes.hex(Digest.sha256(der)) }
}

/// PEM text: base64 lines between `-----BEGIN …-----` and `-----END …-----`.
package enum PEM {
    /// The DER inside `text` (its lines that are not markers, joined), or nil if that is not base64.
    package static func body(_ text: String) -> [UInt8]? {
        let base64 = text.split(whereSeparator: \.isNewline).filter { !$0.hasPrefix("-----") }
            .map { $0.trimmingCharacters(in: .whitespaces) }.joined()
        return Data(base64Encoded: base64).map { [UInt8]($0) }
    }

    package static func text(_ der: [UInt8], label: String) -> String {
        let body = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN \(label)-----\n\(body)\n-----END \(label)-----\n"
    }
}

extension X509Certificate {
    /// Dotted object identifiers of the certificate extensions and attributes the engine
    /// reads (and its test authorities write), each written once.
    package enum OID {
        /// id-ce-basicConstraints (RFC 5280 §4.2.1.9).
        package static let basicConstraints = "2.5.29.19"
        /// id-ce-subjectAltName (RFC 5280 §4.2.1.6).
        package static let subjectAltName = "2.5.29.17"
        /// id-ce-extKeyUsage (RFC 5280 §4.2.1.12).
        package static let extendedKeyUsage = "2.5.29.37"
        /// id-fido-gen-ce-aaguid, the FIDO AAGUID certificate extension (WebAuthn L3 §8.2.1).
        package static let fidoGenCeAAGUID = "1.3.6.1.4.1.45724.1.1.4"
        /// tcg-kp-AIKCertificate, the extended key usage of a TPM AIK certificate (WebAuthn L3 §8.3.1).
        package static let tcgKpAIKCertificate = "2.23.133.8.3"
        /// tcg-at-tpmManufacturer, a TPM subject alternative name attribute.
        package static let tpmManufacturer = "2.23.133.2.1"
        /// tcg-at-tpmModel, a TPM subject alternative name attribute.
        package static let tpmModel = "2.23.133.2.2"
        /// tcg-at-tpmVersion, a TPM subject alternative name attribute.
        package static let tpmVersion = "2.23.133.2.3"
        /// Android's key attestation KeyDescription extension (WebAuthn L3 §8.4).
        package static let androidKeyDescription = "1.3.6.1.4.1.11129.2.1.17"
        /// Apple's anonymous attestation nonce extension (WebAuthn L3 §8.8).
        package static let appleNonce = "1.2.840.113635.100.8.2"
    }
}
