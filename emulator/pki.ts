// A throwaway PKI per environment, as envtest makes one: a CA that signs the API server's
// serving certificate and an admin client certificate in system:masters, plus the key pair
// that signs ServiceAccount tokens (so TokenRequest works and the bridge can run as its SA).
// @peculiar/x509 resolves its ASN.1 schemas through Reflect metadata; it must load first.
import "reflect-metadata";
import { webcrypto } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import * as x509 from "@peculiar/x509";

const ecdsa = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

export interface PkiFiles {
  caCert: string;
  caKey: string;
  servingCert: string;
  servingKey: string;
  adminCert: string;
  adminKey: string;
  saPublicKey: string;
  saPrivateKey: string;
  /** PEM contents for the kubeconfig, which embeds them rather than pointing at files. */
  pem: { ca: string; adminCert: string; adminKey: string };
}

async function keyPair(): Promise<webcrypto.CryptoKeyPair> {
  return await webcrypto.subtle.generateKey(ecdsa, true, ["sign", "verify"]);
}

async function privatePem(key: webcrypto.CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey("pkcs8", key);
  return x509.PemConverter.encode(der, "PRIVATE KEY");
}

async function publicPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey("spki", key);
  return x509.PemConverter.encode(der, "PUBLIC KEY");
}

export async function createPki(dir: string): Promise<PkiFiles> {
  x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(Date.now() + 7 * 24 * 3600_000);
  const caKeys = await keyPair();
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    name: "CN=crdfn-local-ca",
    keys: caKeys,
    notBefore,
    notAfter,
    signingAlgorithm: ecdsa,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });

  const leaf = async (subject: string, usage: x509.ExtendedKeyUsage, sans: x509.JsonGeneralName[] = []) => {
    const keys = await keyPair();
    const cert = await x509.X509CertificateGenerator.create({
      subject,
      issuer: ca.subject,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      notBefore,
      notAfter,
      signingAlgorithm: ecdsa,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
        new x509.ExtendedKeyUsageExtension([usage]),
        await x509.AuthorityKeyIdentifierExtension.create(caKeys.publicKey),
        ...(sans.length ? [new x509.SubjectAlternativeNameExtension(sans)] : []),
      ],
    });
    return { cert: cert.toString("pem"), key: await privatePem(keys.privateKey) };
  };

  const serving = await leaf("CN=kube-apiserver", x509.ExtendedKeyUsage.serverAuth, [
    { type: "ip", value: "127.0.0.1" },
    { type: "dns", value: "localhost" },
    { type: "dns", value: "kubernetes.default.svc" },
  ]);
  const admin = await leaf("CN=crdfn-admin, O=system:masters", x509.ExtendedKeyUsage.clientAuth);
  const saKeys = await keyPair();

  const files: Omit<PkiFiles, "pem"> = {
    caCert: join(dir, "ca.crt"),
    caKey: join(dir, "ca.key"),
    servingCert: join(dir, "apiserver.crt"),
    servingKey: join(dir, "apiserver.key"),
    adminCert: join(dir, "admin.crt"),
    adminKey: join(dir, "admin.key"),
    saPublicKey: join(dir, "sa.pub"),
    saPrivateKey: join(dir, "sa.key"),
  };
  const caPem = ca.toString("pem");
  const contents: Record<keyof typeof files, string> = {
    caCert: caPem,
    caKey: await privatePem(caKeys.privateKey),
    servingCert: serving.cert,
    servingKey: serving.key,
    adminCert: admin.cert,
    adminKey: admin.key,
    saPublicKey: await publicPem(saKeys.publicKey),
    saPrivateKey: await privatePem(saKeys.privateKey),
  };
  for (const k of Object.keys(files) as (keyof typeof files)[]) writeFileSync(files[k], contents[k], { mode: 0o600 });
  return { ...files, pem: { ca: caPem, adminCert: admin.cert, adminKey: admin.key } };
}
