# `cmake --install build [--prefix P]` and the Debian package (`cpack -G DEB` in build/):
#   bin/glmserve
#   share/man/man1/glmserve.1             generated from the help texts (cmake/man.sh)
#   share/doc/glmserve/                   README.md and docs/*.md
#   lib/systemd/system/glmserve-*.service  deploy/systemd with this prefix's paths
#   lib/tmpfiles.d/glmserve.conf          the socket directory for supervisord
#   share/doc/glmserve/examples/supervisord.conf
# The units in deploy/ name /usr/local (the default prefix, for a copy by hand as
# docs/operations.md shows); installed, they name the prefix they are installed under.
include(GNUInstallDirs)

install(TARGETS glmserve RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(GLM_DOC_DIR ${CMAKE_INSTALL_DATADIR}/doc/glmserve)
file(GLOB glm_docs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${glm_docs} DESTINATION ${GLM_DOC_DIR})

# The man page: glmserve's own help texts, so it cannot drift from the binary.
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/glmserve.1
  COMMAND ${PROJECT_SOURCE_DIR}/cmake/man.sh $<TARGET_FILE:glmserve> ${CMAKE_BINARY_DIR}/glmserve.1
  DEPENDS glmserve ${PROJECT_SOURCE_DIR}/cmake/man.sh
  COMMENT "man page from the help texts")
add_custom_target(glmserve_man ALL DEPENDS ${CMAKE_BINARY_DIR}/glmserve.1)
install(FILES ${CMAKE_BINARY_DIR}/glmserve.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# deploy/ files with the paths of the prefix they are installed under: CMAKE_INSTALL_PREFIX
# as the install step sees it, so `cmake --install --prefix P` and the package (/usr) agree.
function(glm_deploy_file src dst_dir dst_name)
  set(out ${CMAKE_BINARY_DIR}/deploy/${dst_name})
  install(CODE "
    file(READ \"${PROJECT_SOURCE_DIR}/deploy/${src}\" text)
    string(REPLACE /usr/local/bin/glmserve \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/glmserve\"
      text \"\${text}\")
    string(REPLACE /usr/local/share/doc/glmserve \"\${CMAKE_INSTALL_PREFIX}/${GLM_DOC_DIR}\"
      text \"\${text}\")
    file(WRITE \"${out}\" \"\${text}\")
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${dst_dir}\" TYPE FILE FILES \"${out}\")")
endfunction()
glm_deploy_file(systemd/glmserve-engine.service lib/systemd/system glmserve-engine.service)
glm_deploy_file(systemd/glmserve-web.service lib/systemd/system glmserve-web.service)
glm_deploy_file(tmpfiles.d/glmserve.conf lib/tmpfiles.d glmserve.conf)
glm_deploy_file(supervisord/glmserve.conf ${GLM_DOC_DIR}/examples supervisord.conf)

# The Debian package: glmserve_VERSION_ARCH.deb. Its maintainer scripts (deploy/debian) add
# the glmserve system user and its directories, and enable the units; they start them when
# a model is in place (/var/lib/glmserve/model.gguf) and say how to get one otherwise.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME glmserve)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "glmserve maintainers <glmserve@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "serve ChatGLM models on your own machine")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
  ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
  ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
