// The translation unit that builds the test binaries' shared precompiled header (glm_test_pch in
// cmake/glm.cmake); it has no code of its own.
