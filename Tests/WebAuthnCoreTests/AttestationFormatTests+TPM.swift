import Foundation
import Testing
import WebAuthnTesting
@testable import WebAuthnCore
import _WebAuthnEncoding

// The `tpm` format (L3 §8.3): what pubArea's objectAttributes say about the credential key.
extension AttestationFormatTests {
    /// The W3C TPM vector with pubArea.objectAttributes set to `attributes`, re-certified by the AIK.
    func tpm(objectAttributes attributes: UInt32) throws -> W3CFixture {
        try tpmECC { pubArea, _, _ in
            pubArea.replaceSubrange(4..<8, with: [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: attributes >> $0) })
        }
    }

    @Test("tpm step 25: a key the TPM did not make and keep (objectAttributes) is untrusted, and refused when trust is required")
    func tpmObjectAttributes() throws {
        // Red team, twenty-seventh pass: objectAttributes was never read, so a software key
        // imported into a genuine TPM (its maker keeps a copy) and certified by the AIK was a
        // trusted TPM attestation, its AAGUID verified.
        let windowsHello: UInt32 = 0x0006_0472  // what every real TPM vector carries
        let resident = try tpm(objectAttributes: windowsHello).verify()
        #expect(resident.trust.trusted, "\(resident.trust.reason)")
        #expect(try tpm(objectAttributes: windowsHello).verify { $0.attestation.requireTrustedAttestation = true }.trust.trusted)

        let missing: [(UInt32, String)] = [
            (windowsHello & ~TPM.ObjectAttribute.fixedTPM, "fixedTPM"), (windowsHello & ~TPM.ObjectAttribute.fixedParent, "fixedParent"),
            (windowsHello & ~TPM.ObjectAttribute.sensitiveDataOrigin, "sensitiveDataOrigin"), (windowsHello & ~TPM.ObjectAttribute.sign, "sign"),
            (0, "fixedTPM, fixedParent, sensitiveDataOrigin, sign"), (0x0002_0000, "fixedTPM, fixedParent, sensitiveDataOrigin, sign"),
        ]
        for (attributes, named) in missing {
            let f = try tpm(objectAttributes: attributes)
            let result = try f.verify()
            #expect(!result.trust.trusted, "0x\(String(attributes, radix: 16))")
            #expect(result.trust.reason.contains("lacks \(named):"), "\(result.trust.reason)")
            #expect(result.riskSignals.contains(.attestationUntrusted))
            #expect(f.code { $0.attestation.requireTrustedAttestation = true } == "attestation_untrusted", "0x\(String(attributes, radix: 16))")
        }
        // The W3C example itself carries `sign` alone.
        let example = try W3CFixture("w3c-tpm-es256.json").verify()
        #expect(!example.trust.trusted && example.trust.reason.contains("lacks fixedTPM, fixedParent, sensitiveDataOrigin:"), "\(example.trust.reason)")
    }
}
