export * from "./apply.ts";
export { CHANGING, declaredPaths, planSteps } from "./plan.ts";
