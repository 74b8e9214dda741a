export * from "./apply.ts";
export { CHANGING, declaredPaths, planSteps } from "./plan.ts";
export * from "./sources.ts";
