// Lint rules catch the mistakes that matter in an operator runtime: floating promises
// (a lost write), unused code, and `any` leaking past a zod boundary.
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", "dist/", ".crdfn/", ".serverless/", ".esbuild/", "**/*.mjs", "**/*.cjs", "eslint.config.js"] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { arguments: false } }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      // One statement per module (a type and a value of it together, `import { type A, b }`).
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "no-duplicate-imports": "error",
      "no-console": "off",
    },
  },
  {
    // A function a reader holds on one screen or two: above 100 lines it holds more than one idea.
    files: ["{core,deploy,clients,bridge,functions,cli,emulator}/**/*.ts"],
    ignores: ["**/*.test.ts"],
    rules: { "max-lines-per-function": ["error", { max: 100, skipBlankLines: true, skipComments: true }] },
  },
  {
    // node:test's describe/it return promises the runner awaits itself.
    files: ["**/*.test.ts", "test/**/*.ts"],
    rules: { "@typescript-eslint/no-floating-promises": "off" },
  },
);
