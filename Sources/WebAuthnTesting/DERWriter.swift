internal import WebAuthnCore
package import _WebAuthnEncoding
package import _WebAuthnCrypto

/// A small DER writer for the extension values of test certificates.
package enum DERWriter {
    package static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + length(content.count) + content }
    package static func length(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        if n < 0x100 { return [0x81, UInt8(n)] }
        return [0x82, UInt8(n >> 8), UInt8(n & 0xff)]
    }
    package static func sequence(_ items: [UInt8]...) -> [UInt8] { tlv(DER.Tag.sequence, items.flatMap { $0 }) }
    package static func set(_ items: [UInt8]...) -> [UInt8] { tlv(DER.Tag.set, items.flatMap { $0 }) }
    package static func octets(_ bytes: [UInt8]) -> [UInt8] { tlv(DER.Tag.octetString, bytes) }
    package static func utf8(_ s: String) -> [UInt8] { tlv(DER.Tag.utf8String, Array(s.utf8)) }
    package static func integer(_ v: Int) -> [UInt8] { v < 0x80 ? tlv(DER.Tag.integer, [UInt8(v)]) : tlv(DER.Tag.integer, [UInt8(v >> 8), UInt8(v & 0xff)]) }
    package static func enumerated(_ v: Int) -> [UInt8] { tlv(DER.Tag.enumerated, [UInt8(v)]) }
    package static func null() -> [UInt8] { [DER.Tag.null, 0x00] }
    package static func boolean(_ b: Bool) -> [UInt8] { [DER.Tag.boolean, 0x01, b ? 0xff : 0x00] }
    package static func oid(_ dotted: String) -> [UInt8] {
        let arcs = dotted.split(separator: ".").map { UInt64($0)! }
        var out: [UInt8] = [UInt8(arcs[0] * 40 + arcs[1])]
        for arc in arcs.dropFirst(2) {
            var chunk: [UInt8] = [UInt8(arc & 0x7f)]
            var v = arc >> 7
            while v > 0 { chunk.insert(UInt8(v & 0x7f) | 0x80, at: 0); v >>= 7 }
            out += chunk
        }
        return tlv(DER.Tag.objectIdentifier, out)
    }
    /// A context-specific EXPLICIT tag ([n], constructed), including tag numbers above 30.
    package static func explicit(_ n: Int, _ content: [UInt8]) -> [UInt8] {
        if n < Int(DER.Tag.numberMask) { return tlv(DER.Tag.contextConstructed(UInt8(n)), content) }
        var number: [UInt8] = [UInt8(n & 0x7f)]
        var v = n >> 7
        while v > 0 { number.insert(UInt8(v & 0x7f) | 0x80, at: 0); v >>= 7 }
        return [DER.Tag.contextConstructed(DER.Tag.numberMask)] + number + length(content.count) + content
    }

    package static let basicConstraintsCAFalse = sequence()
    package static let basicConstraintsCATrue = sequence(boolean(true))
    package static func aaguid(_ bytes: [UInt8]) -> [UInt8] { octets(bytes) }
    /// SAN with a directoryName holding the TPM attributes (each in its own RDN).
    package static func tpmSAN(manufacturer: String? = "id:49424D00", model: String? = "FIDO-TPM", version: String? = "id:00020008") -> [UInt8] {
        var rdns: [UInt8] = []
        for (oid, value) in [
            (X509Certificate.OID.tpmManufacturer, manufacturer), (X509Certificate.OID.tpmModel, model), (X509Certificate.OID.tpmVersion, version),
        ] {
            if let value { rdns += set(sequence(self.oid(oid), utf8(value))) }
        }
        return sequence(explicit(4, sequence(rdns)))
    }
    package static func extendedKeyUsage(_ oids: String...) -> [UInt8] { sequence(oids.flatMap { oid($0) }) }

    /// `certificate` (DER) re-encoded as X.509 version 1, its extensions kept, and
    /// re-signed by `issuerKey` (the key that issued it, with the same signature
    /// algorithm). OpenSSL writes version 3 whenever a certificate has extensions, so
    /// this is how a version-1 certificate that meets every other requirement is made.
    package static func version1(_ certificate: [UInt8], issuerKey: SigningKey) throws(WebAuthnError) -> [UInt8] {
        // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue BIT STRING }
        let parts = try DER.parse(certificate).children()
        guard parts.count == 3 else { throw WebAuthnError(.configurationInvalid, "not a certificate") }
        // tbsCertificate without its `[0] EXPLICIT version`: version 1 is the DEFAULT, so it is omitted.
        let fields = try parts[0].children().filter { $0.tag != DER.Tag.contextConstructed(0) }
        let tbs = tlv(DER.Tag.sequence, fields.flatMap { tlv($0.tag, Array($0.value)) })
        let bitString: UInt8 = 0x03
        return sequence(tbs, tlv(parts[1].tag, Array(parts[1].value)), tlv(bitString, [0] + (try issuerKey.sign(tbs))))
    }
}
