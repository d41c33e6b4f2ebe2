internal import COpenSSL
package import Foundation
package import _WebAuthnEncoding

/// Issues X.509 certificates through OpenSSL, for test PKIs: the software
/// authenticator's attestation chains and the engine's negative fixtures.
/// SPI: relying parties never issue certificates.
package struct CertificateBuilder {
    package var subject: [(String, String)] = []
    package var serial: UInt64 = 1
    package var notBefore = Date(timeIntervalSince1970: 1_704_067_200)  // 2024-01-01
    package var notAfter = Date(timeIntervalSince1970: 4_102_444_800)  // 2100-01-01
    /// X.509 version as written (1 or 3).
    package var version = 3
    /// Extensions as (dotted OID, critical, DER of extnValue's contents).
    package var extensions: [(oid: String, critical: Bool, der: [UInt8])] = []

    package init(subject: [(String, String)] = []) { self.subject = subject }

    /// Signs a certificate for `key`'s public key with `issuerKey`; `issuer` nil makes it self-issued.
    package func build(key: SigningKey, issuer: X509Certificate?, issuerKey: SigningKey) throws(WebAuthnError) -> X509Certificate {
        guard let x = X509_new() else { throw OpenSSL.failure("X509_new") }
        var owned = true
        defer { if owned { X509_free(x) } }
        var ok = X509_set_version(x, Int(version - 1)) == 1
        ok = ok && ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), serial) == 1
        ok = ok && ASN1_TIME_set(X509_getm_notBefore(x), time_t(notBefore.timeIntervalSince1970)) != nil
        ok = ok && ASN1_TIME_set(X509_getm_notAfter(x), time_t(notAfter.timeIntervalSince1970)) != nil
        guard let name = X509_NAME_new() else { throw OpenSSL.failure("X509_NAME_new") }
        defer { X509_NAME_free(name) }
        for (field, value) in subject {
            ok = ok && X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0) == 1
        }
        ok = ok && X509_set_subject_name(x, name) == 1
        ok = ok && X509_set_issuer_name(x, issuer.map { X509_get_subject_name($0.x509) } ?? name) == 1
        ok = ok && X509_set_pubkey(x, key.pkey) == 1
        for ext in extensions where ok {
            guard let obj = OBJ_txt2obj(ext.oid, 1), let octets = ASN1_OCTET_STRING_new() else { throw OpenSSL.failure("extension") }
            defer { ASN1_OBJECT_free(obj); ASN1_OCTET_STRING_free(octets) }
            ok = ASN1_OCTET_STRING_set(octets, ext.der, Int32(ext.der.count)) == 1
            guard ok, let created = X509_EXTENSION_create_by_OBJ(nil, obj, ext.critical ? 1 : 0, octets) else { throw OpenSSL.failure("extension") }
            defer { X509_EXTENSION_free(created) }
            ok = X509_add_ext(x, created, -1) == 1
        }
        let md: OpaquePointer? = issuerKey.algorithm.digest == nil ? nil : OpenSSL.sha256
        ok = ok && X509_sign(x, issuerKey.pkey, md) > 0
        guard ok else { throw OpenSSL.failure("issuing a certificate") }
        owned = false
        return X509Certificate(taking: x)
    }
}

extension SigningKey {
    /// A P-256 private key from its raw 32-byte scalar (the W3C test vectors publish theirs).
    package static func p256(privateScalar: [UInt8], algorithm: COSEAlgorithm = .es256) throws(WebAuthnError) -> SigningKey {
        let curve = ECCurve.p256
        guard privateScalar.count == curve.coordinateSize, let bn = BN_bin2bn(privateScalar, Int32(curve.coordinateSize), nil) else {
            throw WebAuthnError(.configurationInvalid, "a P-256 private scalar is 32 bytes")
        }
        defer { BN_free(bn) }
        // The public point, from the private scalar.
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1), let point = EC_POINT_new(group) else { throw OpenSSL.failure("EC group") }
        defer { EC_GROUP_free(group); EC_POINT_free(point) }
        var pub = [UInt8](repeating: 0, count: curve.uncompressedPointSize)
        guard EC_POINT_mul(group, point, bn, nil, nil, nil) == 1,
            EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &pub, pub.count, nil) == pub.count
        else { throw OpenSSL.failure("EC point") }
        guard let builder = OSSL_PARAM_BLD_new() else { throw OpenSSL.failure("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard OSSL_PARAM_BLD_push_utf8_string(builder, OpenSSL.ParamName.group, OpenSSL.ParamName.p256, 0) == 1,
            OSSL_PARAM_BLD_push_octet_string(builder, OpenSSL.ParamName.publicKey, pub, pub.count) == 1,
            OSSL_PARAM_BLD_push_BN(builder, OpenSSL.ParamName.privateKey, bn) == 1,
            let params = OSSL_PARAM_BLD_to_param(builder)
        else { throw OpenSSL.failure("EC key parameters") }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw OpenSSL.failure("EC context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &pkey, webauthn_evp_pkey_keypair_selection(), params) == 1, let pkey else {
            throw OpenSSL.failure("importing the EC private key")
        }
        return SigningKey(taking: pkey, algorithm: algorithm)
    }
}

/// Issues X.509 v2 CRLs through OpenSSL, for test PKIs (the conformance
/// runner's metadata-service chain). SPI: relying parties never issue CRLs.
package struct CRLBuilder {
    /// Serial numbers of the revoked certificates.
    package var revokedSerials: [UInt64]
    package var lastUpdate = Date(timeIntervalSince1970: 1_704_067_200)  // 2024-01-01
    package var nextUpdate = Date(timeIntervalSince1970: 4_102_444_800)  // 2100-01-01

    package init(revoking serials: [UInt64] = []) { revokedSerials = serials }

    /// The CRL, DER, signed by `issuerKey` in the name of `issuer`.
    package func build(issuer: X509Certificate, issuerKey: SigningKey) throws(WebAuthnError) -> [UInt8] {
        guard let crl = X509_CRL_new() else { throw OpenSSL.failure("X509_CRL_new") }
        defer { X509_CRL_free(crl) }
        guard let last = ASN1_TIME_set(nil, time_t(lastUpdate.timeIntervalSince1970)),
            let next = ASN1_TIME_set(nil, time_t(nextUpdate.timeIntervalSince1970))
        else { throw OpenSSL.failure("CRL times") }
        defer { ASN1_TIME_free(last); ASN1_TIME_free(next) }
        var ok = X509_CRL_set_version(crl, 1) == 1
        ok = ok && X509_CRL_set_issuer_name(crl, X509_get_subject_name(issuer.x509)) == 1
        ok = ok && X509_CRL_set1_lastUpdate(crl, last) == 1 && X509_CRL_set1_nextUpdate(crl, next) == 1
        for serial in revokedSerials where ok {
            guard let revoked = X509_REVOKED_new() else { throw OpenSSL.failure("X509_REVOKED_new") }
            guard let number = ASN1_INTEGER_new() else { X509_REVOKED_free(revoked); throw OpenSSL.failure("ASN1_INTEGER_new") }
            defer { ASN1_INTEGER_free(number) }
            ok =
                ASN1_INTEGER_set_uint64(number, serial) == 1 && X509_REVOKED_set_serialNumber(revoked, number) == 1
                && X509_REVOKED_set_revocationDate(revoked, last) == 1
            // add0 takes the entry; on failure it is still ours to free.
            if ok && X509_CRL_add0_revoked(crl, revoked) == 1 { continue }
            X509_REVOKED_free(revoked)
            ok = false
        }
        ok = ok && X509_CRL_sort(crl) == 1
        let md: OpaquePointer? = issuerKey.algorithm.digest == nil ? nil : OpenSSL.sha256
        ok = ok && X509_CRL_sign(crl, issuerKey.pkey, md) > 0
        guard ok else { throw OpenSSL.failure("issuing a CRL") }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509_CRL(crl, &out)
        guard length > 0, let out else { throw OpenSSL.failure("encoding a CRL") }
        defer { webauthn_openssl_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
